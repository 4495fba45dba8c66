"""gru_from_zero equals a GRU cell applied to a zero hidden state; gru_cell and input_products
equal nn.GRUCell's and F.linear's computations."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnas.graphvae.gru import gru_from_zero, input_products


def test_equals_gru_cell_from_zero_state():
    torch.manual_seed(0)
    cell = nn.GRUCell(5, 7)
    x = torch.randn(11, 5)
    assert torch.allclose(gru_from_zero(cell, x), cell(x, torch.zeros(11, 7)), atol=1e-6)


def test_without_bias():
    torch.manual_seed(0)
    cell = nn.GRUCell(3, 4, bias=False)
    x = torch.randn(2, 3)
    assert torch.allclose(gru_from_zero(cell, x), cell(x, torch.zeros(2, 4)), atol=1e-6)


def test_gru_cell_from_products_equals_gru_cell():
    from attnas.graphvae.gru import gru_cell

    torch.manual_seed(0)
    cell = nn.GRUCell(5, 7).double()
    x, h = torch.randn(11, 5, dtype=torch.float64), torch.randn(11, 7, dtype=torch.float64)
    gi = x @ cell.weight_ih.T + cell.bias_ih
    gh = h @ cell.weight_hh.T + cell.bias_hh
    assert torch.allclose(gru_cell(gi, gh, h), cell(x, h), atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_input_products_equal_linear_with_gradients(bias):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 5, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.randn(6, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, generator=gen, requires_grad=True) if bias else None
    params = [x, w] + ([b] if bias else [])
    out = input_products(x, w, b)
    ref = F.linear(x, w, b)
    assert out.shape == ref.shape == (4, 5, 6)
    assert torch.allclose(out, ref, atol=1e-12)
    up = torch.randn(4, 5, 6, dtype=torch.float64, generator=gen)
    for g, r in zip(torch.autograd.grad((out * up).sum(), params), torch.autograd.grad((ref * up).sum(), params)):
        assert torch.allclose(g, r, atol=1e-12)
