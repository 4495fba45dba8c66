"""as_nchw and split_nchw: NCHW values for the kernels, the gradient back in the input's layout."""

from __future__ import annotations

import pytest
import torch

from attnas.kernels import layout as _layout_kernel
from attnas.ops.hoga_cell import HOGA
from attnas.ops.hoga_relaxed import RelaxedHOGA
from attnas.kernels.layout import as_channels_last
from attnas.ops.memory_format import as_nchw, is_channels_last, split_nchw
from compiled_kernels import disable_kernel, loaded_kernel


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
    off_cpu = torch.empty(2, 5, 4, 3, device="meta").contiguous(memory_format=torch.channels_last)
    assert as_nchw(off_cpu) is off_cpu  # no kernel reads planes there
    assert all(g._base is off_cpu for g in split_nchw(off_cpu, 1))  # views in x's own layout


def test_cells_give_the_gradient_back_in_the_input_layout():
    x = torch.randn(4, 8, 6, 6).contiguous(memory_format=torch.channels_last).requires_grad_()
    edges = {"0-0": "identity", "0-1": "norm_d1", "1-1": "cbam"}
    for cell in (HOGA(8, edges, groups=2), RelaxedHOGA(8, groups=2)):
        y = cell(x)
        (grad,) = torch.autograd.grad(y, x, torch.randn_like(y))
        assert y.is_contiguous(memory_format=torch.channels_last), type(cell).__name__
        assert grad.is_contiguous(memory_format=torch.channels_last), type(cell).__name__


@pytest.fixture
def kernel():
    """The compiled layout kernel (skipped without a compiler)."""
    return loaded_kernel(_layout_kernel)


# (B, C, H, W, group channels): full 8 x 8 blocks, odd channel and position counts (the
# element-by-element edges), one group, planes smaller than a block.
SHAPES = [(3, 16, 4, 4, 4), (2, 12, 5, 3, 3), (2, 10, 3, 3, 2), (4, 24, 7, 9, 24), (2, 8, 1, 2, 8), (64, 16, 2, 2, 4)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_split_nchw_equals_split_of_contiguous_and_merges_gradients_channels_last(kernel, dtype, shape):
    B, C, H, W, c = shape
    x = torch.randn(B, C, H, W, dtype=dtype).contiguous(memory_format=torch.channels_last).requires_grad_()
    groups = split_nchw(x, c)
    assert type(groups[0].grad_fn).__name__ == "_SplitNCHWBackward"  # the kernel ran, not the fallback
    want = torch.split(x.detach().contiguous(), c, 1)
    assert len(groups) == C // c
    for got, ref in zip(groups, want):
        assert got.is_contiguous() and torch.equal(got, ref)
    grads = [torch.randn(B, c, H, W, dtype=dtype) for _ in groups]
    used = [i != 1 or len(groups) == 1 for i in range(len(groups))]  # group 1 unused: zeros
    loss = sum((g * w).sum() for g, w, u in zip(groups, grads, used) if u)
    (grad,) = torch.autograd.grad(loss, x)
    expected = torch.cat([w if u else torch.zeros_like(w) for w, u in zip(grads, used)], 1)
    assert grad.is_contiguous(memory_format=torch.channels_last) and torch.equal(grad, expected)


def test_as_nchw_runs_the_kernel_on_float_tensors(kernel):
    x = torch.randn(3, 16, 5, 6).contiguous(memory_format=torch.channels_last).requires_grad_()
    y = as_nchw(x)
    assert type(y.grad_fn).__name__ == "_SplitNCHWBackward" and y.is_contiguous() and torch.equal(y, x)
    g = torch.randn(3, 16, 5, 6)
    (grad,) = torch.autograd.grad(y, x, g)
    assert grad.is_contiguous(memory_format=torch.channels_last) and torch.equal(grad, g)


def test_split_nchw_falls_back_off_the_kernel():
    x = torch.randn(2, 6, 3, 3)  # NCHW: views, no copy
    groups = split_nchw(x, 2)
    assert all(g.data_ptr() == x[:, 2 * i:].data_ptr() for i, g in enumerate(groups))
    xi = torch.randint(0, 9, (2, 6, 3, 3)).contiguous(memory_format=torch.channels_last)  # not a kernel dtype
    assert all(torch.equal(a, b) for a, b in zip(split_nchw(xi, 3), torch.split(xi.contiguous(), 3, 1)))


@pytest.mark.parametrize("how", ["no compiler", "ATTNAS_NO_KERNELS"])
def test_split_nchw_and_as_nchw_fall_back_to_pytorch_copies(monkeypatch, how):
    disable_kernel(monkeypatch, _layout_kernel, how)
    x = torch.randn(2, 8, 3, 5, dtype=torch.float64).contiguous(memory_format=torch.channels_last).requires_grad_()
    groups = split_nchw(x, 4)
    assert type(groups[0].grad_fn).__name__ != "_SplitNCHWBackward"
    assert all(torch.equal(a, b) for a, b in zip(groups, torch.split(x.detach().contiguous(), 4, 1)))
    (grad,) = torch.autograd.grad(groups[1].sum(), x)
    assert grad.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(grad, torch.cat([torch.zeros(2, 4, 3, 5, dtype=torch.float64),
                                        torch.ones(2, 4, 3, 5, dtype=torch.float64)], 1))
    y = as_nchw(x)
    assert type(y.grad_fn).__name__ == "_AsNCHWBackward" and torch.equal(y, x)
    assert _layout_kernel.LIBRARY.unavailable_reason()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(3, 16, 5, 6), (2, 5, 3, 7), (1, 9, 1, 2)])
def test_as_channels_last_runs_the_kernel_both_ways(kernel, dtype, shape):
    y = torch.randn(shape, dtype=dtype).requires_grad_()
    z = as_channels_last(y)
    assert type(z.grad_fn).__name__ == "_ToChannelsLastBackward"
    assert is_channels_last(z) and torch.equal(z, y)
    g = torch.randn(shape, dtype=dtype).contiguous(memory_format=torch.channels_last)
    (grad,) = torch.autograd.grad(z, y, g)
    assert grad.is_contiguous() and torch.equal(grad, g)


def test_as_channels_last_falls_back_to_pytorch(monkeypatch):
    disable_kernel(monkeypatch, _layout_kernel, "ATTNAS_NO_KERNELS")
    y = torch.randn(2, 5, 3, 4, dtype=torch.float64).requires_grad_()
    z = as_channels_last(y)
    assert type(z.grad_fn).__name__ != "_ToChannelsLastBackward" and is_channels_last(z) and torch.equal(z, y)
    one = torch.randn(2, 1, 3, 4)  # already in both layouts: returned as it is
    assert as_channels_last(one) is one
