"""The gates' mean pooling: the same values and gradients as torch.mean."""

from __future__ import annotations

import pytest
import torch

from attnas.ops.autola.gate_pooling import mean


@pytest.mark.parametrize("dims", [1, (2, 3), -1, (3, 4)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_mean_equals_torch_mean(dims, channels_last):
    torch.manual_seed(1)
    x = torch.randn(2, 3, 4, 5, 6) if dims == (3, 4) else torch.randn(2, 3, 4, 5)
    if channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    ref_x, got_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref, got = ref_x.mean(dims), mean(got_x, dims)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)
    probe = torch.randn_like(ref)
    (ref * probe).sum().backward()
    (got * probe).sum().backward()
    torch.testing.assert_close(got_x.grad, ref_x.grad, atol=1e-7, rtol=1e-6)
