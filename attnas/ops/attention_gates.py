"""AutoLA's discrete attention modules as single compiled autograd operations on the CPU.

Each module of :mod:`attnas.ops.vision_attention` computes ``y = x * g(x)`` (AutoLA, Ma et
al., NeurIPS 2020, Sec. 3.2). Its PyTorch expression is 10-25 operations and autograd nodes;
here each module is one :class:`torch.autograd.Function` whose forward and backward are one
call each of the kernels in :mod:`attnas.ops._attention_gates_kernel`:

* :func:`normalization_attention` -- Eq. 7, ``x * sigmoid(dwconv_k(x) + beta)``.
* :func:`spatial_attention` -- Eq. 6, ``x * sigmoid(BN(conv([mean_c x; max_c x])))`` with
  a one-channel ``nn.BatchNorm2d`` (batch statistics and the running-statistics update in
  training, as ``nn.BatchNorm2d`` does); with a channel MLP, CBAM (Eq. 8): the same gate on
  the output of the channel attention v2, both in one operation.
* :func:`channel_attention` -- Eq. 4 (``x * sigmoid(f(mean_P x))``, squeeze-and-excitation)
  and Eq. 5 (``x * sigmoid(f(mean_P x) + f(max_P x))``) with ``f = W2 relu(W1 .)``.

They give the values and the gradients (input and every parameter) of the PyTorch
expressions up to float rounding, except that the gradient of a maximum goes to the first
maximal element, as in max pooling (``torch.amax`` splits it among ties; the two agree
wherever the maximum is unique). First derivatives only: a double backward raises.

Layout: an input whose channel planes are contiguous (``(B, c, H, W)`` with strides
``(any, H W, W, 1)``, e.g. a channel slice of an NCHW tensor, as in the HOGA cell) is read in
place and gives an NCHW-contiguous output; any other input is made contiguous first and the
output has the input's memory format (``channels_last`` stays ``channels_last``).
:func:`kernels_apply` says when the kernels run (CPU float32 / float64, library built);
elsewhere the modules run their PyTorch expression.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from attnas.ops import _attention_gates_kernel
from attnas.ops._compiled import KERNEL_DTYPES
from attnas.ops.memory_format import as_channels_last, as_nchw, is_channels_last, planes_contiguous
from attnas.ops.running_stats import count_batch


def kernels_apply(x: torch.Tensor, *params: torch.Tensor | None) -> bool:
    """Whether the compiled kernels run for input ``x`` and the module's ``params``
    (4-D CPU float32 / float64 tensors of one dtype, library built)."""
    return (x.dim() == 4 and x.device.type == "cpu" and x.dtype in KERNEL_DTYPES
            and all(p is None or (p.dtype == x.dtype and p.device.type == "cpu") for p in params)
            and (_attention_gates_kernel.LIBRARY.library is not None or _attention_gates_kernel.load() is not None))


def _call(name: str, *args) -> None:
    """Kernel ``attnas_<name>`` on ``args`` and torch's thread count."""
    _attention_gates_kernel.LIBRARY.call(f"attnas_{name}", *args, torch.get_num_threads())


def _planes(x: torch.Tensor) -> tuple[torch.Tensor, torch.memory_format]:
    """``x`` itself when its channel planes are contiguous (any batch stride), else an NCHW
    copy; and the memory format of the result to return."""
    if planes_contiguous(x):
        return x, torch.contiguous_format
    if is_channels_last(x):  # the copy's backward gives the gradient back channels-last too
        return as_nchw(x), torch.channels_last
    return x.contiguous(), torch.contiguous_format


def _batch_stride(x: torch.Tensor) -> int:
    """The distance between images (any value will do for fewer than two images)."""
    return x.stride(0) if x.shape[0] > 1 else x.shape[1] * x.shape[2] * x.shape[3]


def _in_format(y: torch.Tensor, fmt: torch.memory_format) -> torch.Tensor:
    return y if fmt == torch.contiguous_format else as_channels_last(y)


class _NormAttention(torch.autograd.Function):
    """Eq. 7 in one kernel call each way (the gate is saved for the backward)."""

    @staticmethod
    def forward(ctx, x, weight, bias, dilation):  # noqa: D102 (autograd protocol)
        B, c, H, W = x.shape
        weight = weight.contiguous()
        bias = None if bias is None else bias.contiguous()
        y, s = x.new_empty(B, c, H, W), x.new_empty(B, c, H, W)
        shape = (B, c, H, W, weight.shape[-1], dilation)
        _call("norm_forward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), weight, bias, y, s, *shape)
        ctx.save_for_backward(x, weight, s)
        ctx.shape, ctx.has_bias = shape, bias is not None
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):  # noqa: D102 (autograd protocol)
        x, weight, s = ctx.saved_tensors
        dx = torch.empty(x.shape, dtype=x.dtype) if ctx.needs_input_grad[0] else None
        dw = torch.empty_like(weight)
        db = x.new_empty(x.shape[1]) if ctx.has_bias else None
        _call("norm_backward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), weight, s, dy.contiguous(), dx, dw, db,
              *ctx.shape)
        return dx, dw, db, None


class _SpatialAttention(torch.autograd.Function):
    """Eq. 6, or CBAM (Eq. 8) when the channel MLP ``w1``, ``w2`` is given, in one kernel call
    each way (the running statistics are updated by the forward's kernel call: ``mode`` 1)."""

    @staticmethod
    def forward(ctx, x, w1, w2, weight, gamma, beta, running_mean, running_var, eps, factor, mode,  # noqa: D102
                dilation):
        B, c, H, W = x.shape
        weight = weight.contiguous()
        w1, w2 = (None, None) if w1 is None else (w1.contiguous(), w2.contiguous())
        h = 0 if w1 is None else w1.shape[0]
        y = x.new_empty(B, c, H, W)
        work = x.new_empty(5 * B * H * W + 2 + (0 if w1 is None else 4 * B * c))  # see SpatialWork, ChannelWork
        shape = (B, c, H, W, weight.shape[-1], dilation)
        _call("spatial_forward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), w1, w2, h, weight, gamma, beta,
              running_mean, running_var, eps, factor, mode, y, work, *shape)
        ctx.save_for_backward(x, w1, w2, weight, gamma, work)
        ctx.shape, ctx.eps, ctx.batch_stats = shape, eps, mode != 2
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):  # noqa: D102 (autograd protocol)
        x, w1, w2, weight, gamma, work = ctx.saved_tensors
        dx = torch.empty(x.shape, dtype=x.dtype) if ctx.needs_input_grad[0] else None
        dw, dbn = torch.empty_like(weight), x.new_empty(2)
        dw1, dw2 = (None, None) if w1 is None else (torch.empty_like(w1), torch.empty_like(w2))
        h = 0 if w1 is None else w1.shape[0]
        _call("spatial_backward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), w1, w2, h, weight, gamma, ctx.eps,
              int(ctx.batch_stats), work, dy.contiguous(), dx, dw, dbn, dw1, dw2, *ctx.shape)
        return dx, dw1, dw2, dw, dbn[:1], dbn[1:], None, None, None, None, None, None


class _ChannelAttention(torch.autograd.Function):
    """Eqs. 4, 5 in one kernel call each way."""

    @staticmethod
    def forward(ctx, x, w1, w2, with_max):  # noqa: D102 (autograd protocol)
        B, C, H, W = x.shape
        w1, w2 = w1.contiguous(), w2.contiguous()
        y, work = x.new_empty(B, C, H, W), x.new_empty(4 * B * C)  # work: pooled, gate, argmax
        shape = (B, C, w1.shape[0], H * W)
        _call("channel_forward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), w1, w2, int(with_max), y, work, *shape)
        ctx.save_for_backward(x, w1, w2, work)
        ctx.shape, ctx.with_max = shape, with_max
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):  # noqa: D102 (autograd protocol)
        x, w1, w2, work = ctx.saved_tensors
        dx = torch.empty(x.shape, dtype=x.dtype) if ctx.needs_input_grad[0] else None
        dw1, dw2 = torch.empty_like(w1), torch.empty_like(w2)
        _call("channel_backward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), w1, w2, int(ctx.with_max), work,
              dy.contiguous(), dx, dw1, dw2, *ctx.shape)
        return dx, dw1, dw2, None


def normalization_attention(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                            dilation: int) -> torch.Tensor:
    """``x * sigmoid(dwconv(x))`` (AutoLA Eq. 7): depth-wise ``k x k`` filters ``weight``
    ``(c, 1, k, k)`` (``k`` odd), optional ``bias`` ``(c,)``, dilation ``d``, zero padding
    ``d (k - 1) / 2``; ``x`` is ``(B, c, H, W)``."""
    x, fmt = _planes(x)
    return _in_format(_NormAttention.apply(x, weight, bias, dilation), fmt)


def spatial_attention(x: torch.Tensor, weight: torch.Tensor, bn: nn.BatchNorm2d, dilation: int,
                      channel_mlp: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """``x * sigmoid(bn(conv([mean_c x; max_c x])))`` (AutoLA Eq. 6) for ``x`` ``(B, c, H, W)``;
    with ``channel_mlp``, CBAM (Eq. 8): the same on ``u = channel_attention(x, *channel_mlp,
    with_max=True)`` (Eq. 5), in one operation (``u`` is never stored).

    Args:
        x: Input.
        weight: The ``2 -> 1`` filter ``(1, 2, k, k)``, ``k`` odd (no bias).
        bn: An affine ``nn.BatchNorm2d(1)``: in training (or without running statistics) it
            normalises with the batch's and updates its running statistics as
            ``nn.BatchNorm2d`` does; in evaluation it uses them.
        dilation: Dilation ``d`` of the filter (zero padding ``d (k - 1) / 2``).
        channel_mlp: CBAM's channel MLP ``(W1 (h, c), W2 (c, h))``, or ``None``.

    Returns:
        ``(B, c, H, W)``.
    """
    x, fmt = _planes(x)
    mode, factor = 2, 0.0  # the running statistics
    if bn.training or bn.running_mean is None:
        mode = 0  # batch statistics
    if bn.training and bn.track_running_stats:
        mode = 1  # and their update
        factor = count_batch(bn)
        # (the kernel writes the running statistics in place; no autograd graph holds them)
    w1, w2 = (None, None) if channel_mlp is None else channel_mlp
    y = _SpatialAttention.apply(x, w1, w2, weight, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps,
                                factor, mode, dilation)
    return _in_format(y, fmt)


def spatial_attention_applies(x: torch.Tensor, weight: torch.Tensor, bn: nn.BatchNorm2d,
                              *channel_mlp: torch.Tensor) -> bool:
    """Whether :func:`spatial_attention` runs for ``x`` (and CBAM's ``channel_mlp``): the
    kernels apply, ``bn`` is affine and one-channel, and a training batch has more than one
    value (else ``nn.BatchNorm2d`` raises its own error on the eager path)."""
    batch_stats = bn.training or bn.running_mean is None
    return (bn.affine and bn.num_features == 1 and kernels_apply(x, weight, bn.weight, bn.bias, *channel_mlp)
            and (not batch_stats or x.shape[0] * x.shape[2] * x.shape[3] > 1)
            and (bn.running_mean is None or bn.running_mean.dtype == x.dtype))


def channel_attention(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, with_max: bool) -> torch.Tensor:
    """``x * sigmoid(f(mean_P x) [+ f(max_P x)])`` (AutoLA Eq. 4; Eq. 5 ``with_max``) with
    ``f(v) = W2 relu(W1 v)``, ``w1`` ``(h, C)``, ``w2`` ``(C, h)``, for ``x`` ``(B, C, H, W)``."""
    x, fmt = _planes(x)
    return _in_format(_ChannelAttention.apply(x, w1, w2, with_max), fmt)
