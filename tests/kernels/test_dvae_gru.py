"""Kernel dvae_gru (PyTorch): the GRU cell step and input products with hand-written backward
passes against the readable ``gru_cell`` and ``F.linear``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnas.graphvae.gru import gru_cell
from attnas.kernels.dvae_gru import gru_step as kernel_gru_step
from attnas.kernels.dvae_gru import input_products as kernel_input_products


@pytest.mark.parametrize("shape", [(5,), (2, 5)])  # plain rows, and the encoder's two stacked directions
def test_kernel_gru_step_equals_gru_cell_with_gradients(shape):

    gen = torch.Generator().manual_seed(7)
    gi = torch.randn(*shape, 12, dtype=torch.float64, generator=gen, requires_grad=True)
    gh = torch.randn(*shape, 12, dtype=torch.float64, generator=gen, requires_grad=True)
    h = torch.randn(*shape, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    out, ref = kernel_gru_step(gi, gh, h), gru_cell(gi, gh, h)
    assert torch.allclose(out, ref, atol=1e-12)
    up = torch.randn(*shape, 4, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad((out * up).sum(), [gi, gh, h])
    want = torch.autograd.grad((ref * up).sum(), [gi, gh, h])
    for name, g, r in zip(("gi", "gh", "h"), got, want):
        assert torch.allclose(g, r, atol=1e-12), name
    assert torch.autograd.gradcheck(kernel_gru_step, (gi[..., :2, :], gh[..., :2, :], h[..., :2, :]))


@pytest.mark.parametrize("bias", [True, False])
def test_input_products_equal_linear_with_gradients(bias):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 5, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.randn(6, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, generator=gen, requires_grad=True) if bias else None
    params = [x, w] + ([b] if bias else [])
    out = kernel_input_products(x, w, b)
    ref = F.linear(x, w, b)
    assert torch.allclose(out, ref, atol=1e-12)
    up = torch.randn(4, 5, 6, dtype=torch.float64, generator=gen)
    for g, r in zip(torch.autograd.grad((out * up).sum(), params), torch.autograd.grad((ref * up).sum(), params)):
        assert torch.allclose(g, r, atol=1e-12)


def test_not_taken_under_autocast_or_mixed_dtypes():
    x, w = torch.randn(2, 3), torch.randn(4, 3, dtype=torch.float64)
    assert kernel_input_products(x, w, None) is NotImplemented
    gi, gh, h = torch.randn(2, 6), torch.randn(2, 6), torch.randn(2, 2, dtype=torch.float64)
    assert kernel_gru_step(gi, gh, h) is NotImplemented
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert kernel_gru_step(gi, gh, h.float()) is NotImplemented
