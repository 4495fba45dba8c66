"""A stride-1 "same" convolution with a faster backward pass on the CPU.

The attention operations of AutoLA (Ma et al., NeurIPS 2020, Sec. 3.2) use small stride-1
convolutions that keep the resolution: the depth-wise ``3 x 3`` filters of the normalization
attention (Eq. 7, dilation 1 or 2) and the ``2 -> 1`` filters of the spatial attention
(Eq. 6, ``3 x 3`` with dilation 1 or 2, and CBAM's ``7 x 7``, Eq. 8). PyTorch's CPU backward
for them (oneDNN) is often far slower than their forward: measured on this machine, the
input gradient of a dilation-2 depth-wise ``3 x 3`` convolution took 4.2 ms and its weight
gradient 3.7 ms for a forward of 0.5 ms (batch 64, 16 channels, 32 x 32, one thread).

:func:`same_conv2d` computes the same function and gradients with one identity: for stride 1
and symmetric "same" padding, the input gradient of a convolution is the convolution of the
output gradient with the spatially flipped, group-transposed filter (the transposed
convolution written as a forward one, which oneDNN runs fast: 0.36 ms in the case above).
The weight gradient is PyTorch's own. (Computing a dilated weight gradient over the
polyphase components ``x[..., a::d, b::d]`` was tried; the two layout copies cost more than
it saved.)

The results equal :func:`torch.nn.functional.conv2d` and its autograd gradients up to
float rounding (summation order); ``tests/ops/test_same_conv.py`` checks them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnas.errors import ConfigError


def _channels_last(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous(memory_format=torch.channels_last)


def _flipped_transpose(weight: torch.Tensor, groups: int) -> torch.Tensor:
    """The filter of the input-gradient convolution: ``(G*o, i, k, k) -> (G*i, o, k, k)``, flipped."""
    out_ch, in_g, kh, kw = weight.shape
    o = out_ch // groups
    w = weight.view(groups, o, in_g, kh, kw).transpose(1, 2).reshape(groups * in_g, o, kh, kw)
    return w.flip(-1, -2)


class _SameConv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, dilation: int, groups: int):
        padding = dilation * (weight.shape[-1] - 1) // 2
        x = _channels_last(x)
        ctx.save_for_backward(x, weight)
        ctx.conf = (dilation, padding, groups, bias is not None)
        return F.conv2d(x, weight, bias, 1, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        d, p, groups, has_bias = ctx.conf
        grad = _channels_last(grad)
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = F.conv2d(grad, _flipped_transpose(weight, groups), None, 1, p, d, groups)
        if ctx.needs_input_grad[1]:
            gw = torch.ops.aten.convolution_backward(
                grad, x, weight, None, [1, 1], [p, p], [d, d], False, [0, 0], groups, [False, True, False])[1]
        if has_bias and ctx.needs_input_grad[2]:
            gb = grad.sum((0, 2, 3))
        return gx, gw, gb, None, None


def same_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, dilation: int = 1,
                groups: int = 1) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, stride=1, padding=dilation * (k - 1) // 2, dilation, groups)``.

    The same function and gradients as the PyTorch call, with the faster backward described
    in the module docstring; the output is channels-last.

    Args:
        x: Input.
        weight: Filters ``(C_out, C_in / groups, k, k)`` with ``k`` odd.
        bias: Optional ``(C_out,)``.
        dilation: Dilation of the filter.
        groups: Convolution groups.

    Returns:
        The convolution, same spatial size as ``x``.

    Shapes:
        - x: ``(B, C_in, H, W)``
        - output: ``(B, C_out, H, W)``
    """
    kh, kw = weight.shape[-2:]
    if kh != kw or kh % 2 == 0 or dilation < 1:
        raise ConfigError(f"same_conv2d needs a square odd kernel and dilation >= 1, got "
                          f"{tuple(weight.shape[-2:])} and dilation {dilation}")
    if torch.jit.is_scripting() or torch.compiler.is_compiling() or x.device.type != "cpu":
        padding = dilation * (kh - 1) // 2  # the plain call (the fast backward is a CPU remedy)
        return F.conv2d(x, weight, bias, 1, padding, dilation, groups)
    return _SameConv2d.apply(x, weight, bias, dilation, groups)
