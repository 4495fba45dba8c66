"""Pooling with cheaper backward passes: the same values and gradients as torch.amax / torch.mean."""

from __future__ import annotations

import pytest
import torch

from attnas.ops.gate_pooling import amax, mean


@pytest.mark.parametrize("dims", [1, 2, (2, 3), (3, 4), -1])
@pytest.mark.parametrize("ties", [False, True])
def test_values_and_gradients_equal_torch_amax(dims, ties):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 5, 6)
    if ties:  # exact ties, including a whole constant slice: amax splits the gradient among them
        x = x.round()
        x[0, 1] = 1.0
    ref_x, got_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref, got = ref_x.amax(dims), amax(got_x, dims)
    torch.testing.assert_close(got, ref, atol=0, rtol=0)
    probe = torch.randn_like(ref)
    (ref * probe).sum().backward()
    (got * probe).sum().backward()
    torch.testing.assert_close(got_x.grad, ref_x.grad, atol=1e-6, rtol=1e-6)


def test_channels_last_input_and_no_grad():
    x = torch.randn(2, 4, 5, 5).contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(amax(x, 1), x.amax(1))
    xr = x.clone().requires_grad_()
    amax(xr, (2, 3)).sum().backward()
    xe = x.clone().requires_grad_()
    xe.amax((2, 3)).sum().backward()
    torch.testing.assert_close(xr.grad, xe.grad)


@pytest.mark.parametrize("dims", [1, (2, 3), -1])
def test_mean_equals_torch_mean(dims):
    torch.manual_seed(1)
    x = torch.randn(2, 3, 4, 5)
    ref_x, got_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref, got = ref_x.mean(dims), mean(got_x, dims)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)
    probe = torch.randn_like(ref)
    (ref * probe).sum().backward()
    (got * probe).sum().backward()
    torch.testing.assert_close(got_x.grad, ref_x.grad, atol=1e-7, rtol=1e-6)
