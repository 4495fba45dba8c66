"""Kernel window_max (PyTorch): AutoAttend's max pool 3 with a fused backward, against autograd's."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from compiled_kernels import kernel_enabled

from attnas.ops import overrides
from attnas.ops.autoattend.sequence_context import SequenceContext
from attnas.ops.autoattend.text import MaxPool3

H = 16


def padded_batch(lengths, L, seed=0):
    """Random real tokens, zeros at pads."""
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(len(lengths), L, H)
    x[:, : max(lengths)] = torch.randn(len(lengths), max(lengths), H, generator=g)
    ctx = SequenceContext.from_lengths(torch.tensor(lengths), L)
    return torch.where(ctx.mask[:, :, None], x, 0.0), ctx


def test_max_pool3_backward_is_autograds_bit_for_bit():
    """The fused backward equals autograd's through the plain formula, ties included."""
    kernel_enabled("window_max")
    assert overrides.active("window_max3")
    torch.manual_seed(0)
    op = MaxPool3(H).train()
    x, ctx = padded_batch([7, 5, 2, 1], 8)
    x[0, 3] = x[0, 2]  # adjacent ties: each of two equal maxima gets half the gradient
    x[1, 1:4] = x[1, 0]
    g = torch.randn(4, 8, H, generator=torch.Generator().manual_seed(1))

    def reference(x):
        h = ctx.lowest_at_pads(op.norm(x))
        hp = F.pad(h, (0, 0, 1, 1), value=torch.finfo(h.dtype).min)
        return ctx.zero_pads(torch.maximum(torch.maximum(hp[:, :-2], hp[:, 1:-1]), hp[:, 2:]))

    grads = []
    for fn in (lambda xi: op(xi, ctx), reference):
        xi = x.clone().requires_grad_()
        y = fn(xi)
        y.backward(g)
        grads.append((y.detach(), xi.grad))
    assert torch.equal(grads[0][0], grads[1][0])
    assert torch.equal(grads[0][1], grads[1][1])
    with torch.no_grad():
        assert torch.equal(op(x, ctx), grads[1][0])
