"""gru_from_zero equals a GRU cell applied to a zero hidden state; gru_cell equals nn.GRUCell's
computation."""

from __future__ import annotations

import torch
from torch import nn

from attnas.graphvae.gru import gru_from_zero


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
