"""same_conv2d: the same values and gradients as F.conv2d with "same" padding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnas.errors import ConfigError
from attnas.ops.same_conv import same_conv2d


@pytest.mark.parametrize(
    "c_in,c_out,groups,k,dilation,size,bias",
    [
        (6, 6, 6, 3, 1, 8, True),    # depth-wise, normalization attention d1 (Eq. 7)
        (6, 6, 6, 3, 2, 8, True),    # depth-wise d2 (normalization attention d2)
        (6, 6, 6, 3, 2, 7, True),    # odd size
        (8, 4, 4, 3, 2, 6, False),   # one 2 -> 1 spatial filter per edge (Eq. 6)
        (2, 3, 1, 7, 1, 9, False),   # one input pair read by three edges, CBAM's 7 x 7 (Eq. 8)
        (4, 6, 2, 5, 3, 9, True),    # general grouping, 5 x 5, dilation 3
    ],
)
@pytest.mark.parametrize("channels_last", [False, True])
def test_values_and_gradients_equal_conv2d(c_in, c_out, groups, k, dilation, size, bias, channels_last):
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(3, c_in, size, size).contiguous(memory_format=fmt)
    w = torch.randn(c_out, c_in // groups, k, k)
    b = torch.randn(c_out) if bias else None
    probe = torch.randn(3, c_out, size, size)

    def run(fn):
        xx, ww = x.clone().requires_grad_(), w.clone().requires_grad_()
        bb = b.clone().requires_grad_() if bias else None
        out = fn(xx, ww, bb)
        (out * probe).sum().backward()
        return out, xx.grad, ww.grad, (bb.grad if bias else None)

    pad = dilation * (k - 1) // 2
    ref = run(lambda xx, ww, bb: F.conv2d(xx, ww, bb, 1, pad, dilation, groups))
    got = run(lambda xx, ww, bb: same_conv2d(xx, ww, bb, dilation, groups))
    for g, r in zip(got, ref):
        if r is not None:
            torch.testing.assert_close(g, r, atol=1e-4, rtol=1e-4)


def test_input_only_and_weight_only_gradients():
    torch.manual_seed(1)
    x, w = torch.randn(2, 4, 6, 6), torch.randn(4, 1, 3, 3)
    xx = x.clone().requires_grad_()
    same_conv2d(xx, w, None, 2, 4).sum().backward()
    xr = x.clone().requires_grad_()
    F.conv2d(xr, w, None, 1, 2, 2, 4).sum().backward()
    torch.testing.assert_close(xx.grad, xr.grad, atol=1e-5, rtol=1e-5)
    ww = w.clone().requires_grad_()
    same_conv2d(x, ww, None, 1, 4).sum().backward()
    wr = w.clone().requires_grad_()
    F.conv2d(x, wr, None, 1, 1, 1, 4).sum().backward()
    torch.testing.assert_close(ww.grad, wr.grad, atol=1e-4, rtol=1e-5)


def test_even_kernel_is_refused():
    with pytest.raises(ConfigError, match="square odd kernel"):
        same_conv2d(torch.randn(1, 2, 4, 4), torch.randn(2, 1, 2, 2), groups=2)
