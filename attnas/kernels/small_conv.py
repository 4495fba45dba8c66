"""Kernel ``small_conv``: direct stride-1 "same" convolutions with few channels per group.

``csrc/small_conv.cpp`` (definitions in ``csrc/small_conv.h``) computes the convolution of
:func:`attnas.ops.autola.small_conv.small_conv2d` on NCHW-contiguous float32 / float64 tensors, forward
and backward (input and weight gradients), for AutoLA's gates: the depth-wise ``3 x 3`` filters
of the normalization attention and the ``2 -> 1`` filters of the spatial attention and CBAM,
where oneDNN's general convolution reaches only 8-15 GFLOP/s. Every thread works on whole
images (a zero-padded copy of one (image, group) plane, a branch-free vectorised row loop); the
weight gradient is summed per thread and then over the threads in order (deterministic for a
given thread count). Also two depth-wise banks on one input in one call each way
(:func:`~attnas.ops.autola.small_conv.depthwise_pair`, the relaxed HOGA cell's normalization gates).

Overrides ``small_conv2d``, ``depthwise_pair`` and the relaxed cell's ``gate_conv``.
"""

from __future__ import annotations

import ctypes

import torch

from attnas.kernels._build import KERNEL_DTYPES, Library
from attnas.ops import overrides

_SHAPE = [ctypes.c_int64] + [ctypes.c_int] * 7 + [ctypes.c_int]
_PAIR = [ctypes.c_int64] + [ctypes.c_int] * 7 + [ctypes.c_int]  # B, Cin, Cout, H, W, K, d1, d2, nthreads
_p = ctypes.c_void_p
LIBRARY = Library("small_conv", {
    "attnas_small_conv_forward": [ctypes.c_int, _p, _p, _p, _p, *_SHAPE],
    "attnas_small_conv_backward": [ctypes.c_int, _p, _p, _p, _p, _p, *_SHAPE],
    "attnas_dw_pair_forward": [ctypes.c_int, *[_p] * 7, *_PAIR],
    "attnas_dw_pair_backward": [ctypes.c_int, *[_p] * 8, *_PAIR],
})


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
        LIBRARY.call("attnas_small_conv_forward", KERNEL_DTYPES[x.dtype], x, weight, b, out,
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
            LIBRARY.call("attnas_small_conv_backward", KERNEL_DTYPES[x.dtype], x, weight, gout, gx,
                                            gw, *_shape(x, weight, ctx.groups, ctx.dilation), torch.get_num_threads())
        gb = gout.sum((0, 2, 3)) if need_b and ctx.has_bias else None
        return gx, gw, gb, None, None


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
        LIBRARY.call("attnas_dw_pair_forward", KERNEL_DTYPES[x.dtype], x, w1, b1, w2, b2, z1, z2,
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
            LIBRARY.call("attnas_dw_pair_backward", KERNEL_DTYPES[x.dtype], x, w1, w2, g1, g2, gx,
                                            gw1, gw2, *ctx.shape, torch.get_num_threads())
        gb1 = g1.sum((0, 2, 3)) if ctx.biases[0] and ctx.needs_input_grad[2] else None
        gb2 = g2.sum((0, 2, 3)) if ctx.biases[1] and ctx.needs_input_grad[4] else None
        return gx, gw1, gb1, gw2, gb2, None, None


def kernel_applies(x: torch.Tensor) -> bool:
    """Whether the kernel runs for ``x`` (CPU float32 / float64, library built)."""
    return x.device.type == "cpu" and x.dtype in KERNEL_DTYPES and LIBRARY.load() is not None


def small_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, dilation: int = 1,
                 groups: int = 1) -> torch.Tensor:
    """Override of :func:`attnas.ops.autola.small_conv.small_conv2d` (returns NCHW-contiguous)."""
    k = weight.shape[-1]
    if k % 2 == 0 or weight.shape[-2] != k:
        return NotImplemented  # the eager function raises its error
    shapes_fit = (x.dim() == 4 and weight.dim() == 4 and weight.shape[1] * groups == x.shape[1]
                  and weight.shape[0] % groups == 0)  # else conv2d raises its own error
    if (shapes_fit and x.dtype == weight.dtype and (bias is None or bias.dtype == x.dtype)
            and weight.device == x.device and kernel_applies(x)):
        return _SmallConv.apply(x, weight, bias, dilation, groups)
    return NotImplemented


def gate_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int,
              groups: int) -> torch.Tensor:
    """Override of the relaxed HOGA cell's gate convolution (returned NCHW-contiguous)."""
    if kernel_applies(x):
        return small_conv2d(x, weight, bias, dilation, groups)
    return NotImplemented


def depthwise_pair(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor | None, d1: int, w2: torch.Tensor,
                   b2: torch.Tensor | None, d2: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Override of :func:`attnas.ops.autola.small_conv.depthwise_pair`: both banks in one call each way
    (the input read once, its gradient summed over both banks and all edges in the kernel)."""
    Cin, Cout, k = x.shape[1], w1.shape[0], w1.shape[-1]
    fits = (x.dim() == 4 and w1.shape == w2.shape and w1.dim() == 4 and w1.shape[1] == 1 and Cout % Cin == 0
            and k % 2 == 1 and w1.shape[-2] == k
            and all(t is None or (t.dtype == x.dtype and t.device == x.device) for t in (w1, w2, b1, b2)))
    if fits and kernel_applies(x):
        return _DepthwisePair.apply(x, w1, b1, w2, b2, d1, d2)
    return NotImplemented


overrides.register("small_conv2d", "small_conv", small_conv2d)
overrides.register("depthwise_pair", "small_conv", depthwise_pair)
overrides.register("gate_conv", "small_conv", gate_conv)
