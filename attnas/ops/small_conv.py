"""Stride-1 "same" convolutions with few channels per group, fast on the CPU.

AutoLA's attention gates (Ma et al., NeurIPS 2020, Sec. 3.2) convolve maps with very few
channels per group: the normalization attention's depth-wise ``3 x 3`` filter (Eq. 7, one
channel per group) and the ``2 -> 1`` filter of the spatial attention and CBAM (Eqs. 6, 8,
``3 x 3`` or ``7 x 7``). For these shapes oneDNN's general convolution runs at 8-15 GFLOP/s
on two cores and dominates the relaxed HOGA cell's time.

:func:`small_conv2d` computes

.. math::
    y_{b,o}(i, j) = \\beta_o + \\sum_{c \\in g(o)} \\sum_{u, v}
        w_{o,c}(u, v) \\, x_{b,c}(i + d (u - r), j + d (v - r)),
    \\qquad r = \\frac{k - 1}{2},

(zero padding ``d r``, ``g(o)`` the input channels of ``o``'s group) with the compiled
direct kernel of :mod:`attnas.ops._small_conv_kernel` on CPU float32 / float64 tensors, and
with :func:`torch.nn.functional.conv2d` elsewhere (other devices and dtypes, no compiler,
``ATTNAS_NO_KERNELS=1``). Both give the same values up to float rounding, and the same
gradients for the input, the weight and the bias.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnas.ops import _small_conv_kernel
from attnas.ops._compiled import KERNEL_DTYPES


def _shape(x: torch.Tensor, weight: torch.Tensor, groups: int, dilation: int) -> list[int]:
    B, Cin, H, W = x.shape
    return [B, Cin, weight.shape[0], groups, H, W, weight.shape[-1], dilation]


class _SmallConv(torch.autograd.Function):
    """The compiled kernel's forward and backward (input, weight and bias gradients)."""

    @staticmethod
    def forward(ctx, x, weight, bias, dilation, groups):  # noqa: D102 (autograd protocol)
        x, weight = x.contiguous(), weight.contiguous()
        b = None if bias is None else bias.contiguous()
        out = x.new_empty(x.shape[0], weight.shape[0], x.shape[2], x.shape[3])
        _small_conv_kernel.LIBRARY.call("attnas_small_conv_forward", KERNEL_DTYPES[x.dtype], x, weight, b, out,
                                        *_shape(x, weight, groups, dilation), torch.get_num_threads())
        ctx.save_for_backward(x, weight)
        ctx.dilation, ctx.groups, ctx.has_bias = dilation, groups, bias is not None
        return out

    @staticmethod
    def backward(ctx, gout):  # noqa: D102 (autograd protocol)
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        gout = gout.contiguous()
        gx = torch.empty_like(x) if need_x else None
        gw = torch.empty_like(weight) if need_w else None
        if need_x or need_w:
            _small_conv_kernel.LIBRARY.call("attnas_small_conv_backward", KERNEL_DTYPES[x.dtype], x, weight, gout, gx,
                                            gw, *_shape(x, weight, ctx.groups, ctx.dilation), torch.get_num_threads())
        gb = gout.sum((0, 2, 3)) if need_b and ctx.has_bias else None
        return gx, gw, gb, None, None


def kernel_applies(x: torch.Tensor) -> bool:
    """Whether :func:`small_conv2d` runs the compiled kernel for ``x`` (CPU float32 / float64)."""
    return x.device.type == "cpu" and x.dtype in KERNEL_DTYPES and _small_conv_kernel.load() is not None


def small_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, dilation: int = 1,
                 groups: int = 1) -> torch.Tensor:
    """A stride-1 convolution with zero padding ``dilation * (k - 1) / 2`` (output size = input size).

    Args:
        x: Input ``(B, C_in, H, W)`` (any memory format; computed in NCHW).
        weight: Filters ``(C_out, C_in / groups, k, k)``, ``k`` odd.
        bias: Optional ``(C_out,)``.
        dilation: Dilation ``d`` of the kernel.
        groups: Number of channel groups.

    Returns:
        ``(B, C_out, H, W)``, NCHW-contiguous from the kernel.
    """
    k = weight.shape[-1]
    if k % 2 == 0 or weight.shape[-2] != k:
        raise ValueError(f"small_conv2d needs a square kernel of odd size, got {tuple(weight.shape[-2:])}")
    shapes_fit = (x.dim() == 4 and weight.dim() == 4 and weight.shape[1] * groups == x.shape[1]
                  and weight.shape[0] % groups == 0)  # else conv2d raises its own error
    if (shapes_fit and x.dtype == weight.dtype and (bias is None or bias.dtype == x.dtype)
            and weight.device == x.device and kernel_applies(x)):
        return _SmallConv.apply(x, weight, bias, dilation, groups)
    return F.conv2d(x, weight, bias, 1, dilation * (k - 1) // 2, dilation, groups)


class _DepthwisePair(torch.autograd.Function):
    """Two banks of depth-wise filters on one input, in one kernel call each way."""

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, d1, d2):  # noqa: D102 (autograd protocol)
        x, w1, w2 = x.contiguous(), w1.contiguous(), w2.contiguous()
        b1 = None if b1 is None else b1.contiguous()
        b2 = None if b2 is None else b2.contiguous()
        B, Cin, H, W = x.shape
        Cout, K = w1.shape[0], w1.shape[-1]
        z1, z2 = x.new_empty(B, Cout, H, W), x.new_empty(B, Cout, H, W)
        _small_conv_kernel.LIBRARY.call("attnas_dw_pair_forward", KERNEL_DTYPES[x.dtype], x, w1, b1, w2, b2, z1, z2,
                                        B, Cin, Cout, H, W, K, d1, d2, torch.get_num_threads())
        ctx.save_for_backward(x, w1, w2)
        ctx.shape, ctx.biases = (B, Cin, Cout, H, W, K, d1, d2), (b1 is not None, b2 is not None)
        return z1, z2

    @staticmethod
    def backward(ctx, g1, g2):  # noqa: D102 (autograd protocol)
        x, w1, w2 = ctx.saved_tensors
        B, _, H, W = x.shape
        g1 = x.new_zeros(B, w1.shape[0], H, W) if g1 is None else g1.contiguous()  # an output not used
        g2 = torch.zeros_like(g1) if g2 is None else g2.contiguous()
        need_x, need_w1, _, need_w2 = ctx.needs_input_grad[:4]
        gx = torch.empty_like(x) if need_x else None
        want_w = need_w1 or need_w2
        gw1, gw2 = (torch.empty_like(w1), torch.empty_like(w2)) if want_w else (None, None)
        if gx is not None or want_w:
            _small_conv_kernel.LIBRARY.call("attnas_dw_pair_backward", KERNEL_DTYPES[x.dtype], x, w1, w2, g1, g2, gx,
                                            gw1, gw2, *ctx.shape, torch.get_num_threads())
        gb1 = g1.sum((0, 2, 3)) if ctx.biases[0] and ctx.needs_input_grad[2] else None
        gb2 = g2.sum((0, 2, 3)) if ctx.biases[1] and ctx.needs_input_grad[4] else None
        return gx, gw1, gb1, gw2, gb2, None, None


def depthwise_pair(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, d1: int, w2: torch.Tensor,
                   b2: torch.Tensor | None, d2: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two depth-wise "same" convolutions of one input, where the outputs may outnumber the inputs.

    Output channel ``o`` of each bank filters input channel ``o mod C_in`` (so ``G = C_out /
    C_in`` edges leaving one node read its channels without a ``repeat``). Equal to
    ``small_conv2d(x.repeat(1, G, 1, 1), w, b, d, C_out)`` for each bank ``(w, b, d)``; on CPU
    float32 / float64 both run in one kernel call each way (the input read once, its gradient
    summed over both banks and all ``G`` edges in the kernel); elsewhere in two such calls.

    Args:
        x: ``(B, C_in, H, W)``.
        w1, w2: ``(C_out, 1, k, k)`` filters (``k`` odd, the same for both), ``C_out`` a multiple
            of ``C_in``.
        b1, b2: Optional ``(C_out,)`` biases.
        d1, d2: Dilations.

    Returns:
        The two outputs, ``(B, C_out, H, W)`` each.
    """
    Cin, Cout, k = x.shape[1], w1.shape[0], w1.shape[-1]
    fits = (x.dim() == 4 and w1.shape == w2.shape and w1.dim() == 4 and w1.shape[1] == 1 and Cout % Cin == 0
            and k % 2 == 1 and w1.shape[-2] == k
            and all(t is None or (t.dtype == x.dtype and t.device == x.device) for t in (w1, w2, b1, b2)))
    if fits and kernel_applies(x):
        return _DepthwisePair.apply(x, w1, b1, w2, b2, d1, d2)
    src = x if Cout == Cin else x.repeat(1, Cout // Cin, 1, 1)
    return small_conv2d(src, w1, b1, d1, Cout), small_conv2d(src, w2, b2, d2, Cout)
