"""as_nchw: NCHW values for the kernels, the gradient back in the input's layout."""

from __future__ import annotations

import torch

from attnas.ops.hoga_cell import HOGA
from attnas.ops.hoga_relaxed import RelaxedHOGA
from attnas.ops.memory_format import as_nchw, is_channels_last


def test_channels_last_input_gives_nchw_values_and_a_channels_last_gradient():
    x = torch.randn(2, 5, 4, 3, dtype=torch.float64).contiguous(memory_format=torch.channels_last).requires_grad_()
    assert is_channels_last(x)
    y = as_nchw(x)
    assert y.is_contiguous() and torch.equal(y, x)
    g = torch.randn(2, 5, 4, 3, dtype=torch.float64)
    (grad,) = torch.autograd.grad(y, x, g)
    assert grad.is_contiguous(memory_format=torch.channels_last) and torch.equal(grad, g)


def test_other_inputs_pass_through():
    x = torch.randn(2, 5, 4, 3)
    assert as_nchw(x) is x and not is_channels_last(x)
    t = x.transpose(2, 3)  # neither layout: left to the kernels' own copies
    assert as_nchw(t) is t
    one = torch.randn(2, 1, 4, 3).contiguous(memory_format=torch.channels_last)  # both layouts at once
    assert not is_channels_last(one) and as_nchw(one) is one


def test_cells_give_the_gradient_back_in_the_input_layout():
    x = torch.randn(4, 8, 6, 6).contiguous(memory_format=torch.channels_last).requires_grad_()
    edges = {"0-0": "identity", "0-1": "norm_d1", "1-1": "cbam"}
    for cell in (HOGA(8, edges, groups=2), RelaxedHOGA(8, groups=2)):
        y = cell(x)
        (grad,) = torch.autograd.grad(y, x, torch.randn_like(y))
        assert y.is_contiguous(memory_format=torch.channels_last), type(cell).__name__
        assert grad.is_contiguous(memory_format=torch.channels_last), type(cell).__name__
