"""Kernel channels_last_grad (PyTorch) against the readable ``as_nchw`` (``x.contiguous()``)."""

from __future__ import annotations

import torch
from compiled_kernels import kernel_enabled, kernels_off

from attnas.ops.autola.memory_format import as_nchw, split_nchw


def _grads(x):
    """``as_nchw`` of a non-leaf channels-last tensor (as in a network) and the gradient that
    reaches that tensor (a leaf's ``.grad`` would take the leaf's layout either way)."""
    leaf = x.detach().requires_grad_()
    x = leaf * 1.0  # keeps the channels-last layout
    seen = []
    x.register_hook(seen.append)
    y = as_nchw(x)
    weight = torch.arange(y.numel(), dtype=y.dtype).view_as(y)
    (y * weight).sum().backward()
    return y, seen[0]


def test_equals_the_readable_copy_and_returns_the_gradient_channels_last():
    kernel_enabled("channels_last_grad")
    x = torch.randn(2, 6, 3, 5).contiguous(memory_format=torch.channels_last)
    y, g = _grads(x)
    with kernels_off():
        y_ref, g_ref = _grads(x)
    assert y.is_contiguous() and y_ref.is_contiguous()
    assert torch.equal(y, y_ref) and torch.equal(g, g_ref)
    assert g.is_contiguous(memory_format=torch.channels_last) and not g.is_contiguous()
    assert g_ref.is_contiguous()  # the readable path hands back an NCHW gradient


def test_nchw_input_is_returned_as_it_is_and_groups_split():
    x = torch.randn(2, 6, 3, 5)
    assert as_nchw(x) is x
    parts = split_nchw(x.contiguous(memory_format=torch.channels_last), 2)
    assert len(parts) == 3 and all(torch.equal(p, q) for p, q in zip(parts, torch.split(x, 2, 1)))
