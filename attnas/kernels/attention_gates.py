"""Kernel ``attention_gates``: AutoLA's discrete attention modules as single compiled operations.

Each module of :mod:`attnas.ops.autola.attention_modules` computes ``y = x * g(x)`` (AutoLA, Ma et
al., NeurIPS 2020, Sec. 3.2). Its PyTorch expression is 10-25 operations and autograd nodes;
here each module is one :class:`torch.autograd.Function` whose forward and backward are one
call each of ``csrc/attention_gates.cpp`` (which includes ``csrc/small_conv.h``):

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

Each module's calls are a :class:`GateKernel` (:class:`NormGate`, :class:`SpatialGate`,
:class:`ChannelGate`), built by :func:`gate_kernel` (``None`` where they do not run);
:func:`gate_function` makes one autograd operation of it, and :func:`attention_gate` is the
override of the modules' ``forward`` (hook ``attention_gate``).

Layout: an input whose channel planes are contiguous (``(B, c, H, W)`` with strides
``(any, H W, W, 1)``, e.g. a channel slice of an NCHW tensor, as in the HOGA cell) is read in
place and gives an NCHW-contiguous output; any other input is made contiguous first and the
output has the input's memory format (``channels_last`` stays ``channels_last``).
:func:`kernels_apply` says when the kernels run (CPU float32 / float64, library built);
elsewhere the modules run their PyTorch expression.
"""

from __future__ import annotations

import ctypes

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from attnas.kernels._build import KERNEL_DTYPES, Library
from attnas.kernels._running_stats import count_batch
from attnas.kernels._planes import planes_contiguous
from attnas.ops import overrides
from attnas.ops.autola.memory_format import as_nchw, is_channels_last
from attnas.ops.autola.attention_modules import (CBAM, ChannelAttention, ChannelAttentionV2, NormalizationAttention,
                                         SpatialAttention)

_p, _i, _i64, _f = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_double
_PLANE = [_i64, _i, _i, _i, _i, _i, _i]  # B, c, H, W, K, d, nthreads
LIBRARY = Library("attention_gates", {
    "attnas_norm_forward": [_i, _p, _i64, _p, _p, _p, _p, *_PLANE],
    "attnas_norm_backward": [_i, _p, _i64, _p, _p, _p, _p, _p, _p, *_PLANE],
    "attnas_spatial_forward": [_i, _p, _i64, _p, _p, _i, _p, _p, _p, _p, _p, _f, _f, _i, _p, _p, *_PLANE],
    "attnas_spatial_backward": [_i, _p, _i64, _p, _p, _i, _p, _p, _f, _i, _p, _p, _p, _p, _p, _p, _p, *_PLANE],
    "attnas_channel_forward": [_i, _p, _i64, _p, _p, _i, _p, _p, _i64, _i, _i, _i64, _i],
    "attnas_channel_backward": [_i, _p, _i64, _p, _p, _i, _p, _p, _p, _p, _p, _i64, _i, _i, _i64, _i],
})


def kernels_apply(x: torch.Tensor, *params: torch.Tensor | None) -> bool:
    """Whether the compiled kernels run for input ``x`` and the module's ``params``
    (4-D CPU float32 / float64 tensors of one dtype, library built)."""
    dtype = x.dtype  # is_cpu and dtype: these checks run on every call (device.type costs 7 times as much)
    return (x.dim() == 4 and x.is_cpu and dtype in KERNEL_DTYPES
            and all(p is None or (p.is_cpu and p.dtype == dtype) for p in params)
            and LIBRARY.load() is not None)


def _call(name: str, *args) -> None:
    """Kernel ``attnas_<name>`` on ``args`` and torch's thread count."""
    LIBRARY.call(f"attnas_{name}", *args, torch.get_num_threads())


def _planes(x: torch.Tensor) -> tuple[torch.Tensor, torch.memory_format]:
    """``x`` itself when its channel planes are contiguous (any batch stride), else an NCHW
    copy; and the memory format of the result to return."""
    if planes_contiguous(x):
        return x, torch.contiguous_format
    if is_channels_last(x):
        return as_nchw(x), torch.channels_last
    return x.contiguous(), torch.contiguous_format


def _batch_stride(x: torch.Tensor) -> int:
    """The distance between images (any value will do for fewer than two images)."""
    return x.stride(0) if x.shape[0] > 1 else x.shape[1] * x.shape[2] * x.shape[3]


def _in_format(y: torch.Tensor, fmt: torch.memory_format) -> torch.Tensor:
    return y if fmt == torch.contiguous_format else y.contiguous(memory_format=torch.channels_last)


class GateKernel:
    """One gated module's compiled calls, ``y = x g(x)`` and its backward, for a given input.

    Built per forward call (it fixes the batch-norm mode of that call; building has no side
    effect, the kernel's forward updates the running statistics). :func:`gate_function`
    wraps it as one autograd operation.

    Attributes:
        params: The tensors the gate has gradients for (parameters, in a fixed order).
    """

    params: tuple[torch.Tensor, ...] = ()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Write ``x g(x)`` into ``y``; return what the backward needs.

        ``x`` ``(B, c, H, W)`` has contiguous planes (any batch stride); ``y`` is contiguous.
        """
        raise NotImplementedError

    def backward(self, saved: tuple[torch.Tensor, ...], dy: torch.Tensor,
                 dx: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        """Write ``d loss / d x`` into ``dx`` (``None``: not wanted) for the contiguous ``dy``;
        return the gradients of :attr:`params`."""
        raise NotImplementedError


class NormGate(GateKernel):
    """Eq. 7: ``x sigmoid(dwconv_d(x) + beta)`` (the gate is saved for the backward)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int):
        self.weight, self.dilation = weight.contiguous(), dilation
        self.bias = None if bias is None else bias.contiguous()
        self.params = (weight,) if bias is None else (weight, bias)

    def forward(self, x, y):  # noqa: D102 (GateKernel)
        B, c, H, W = x.shape
        s = x.new_empty(B, c, H, W)
        _call("norm_forward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), self.weight, self.bias, y, s, B, c, H, W,
              self.weight.shape[-1], self.dilation)
        return x, s

    def backward(self, saved, dy, dx):  # noqa: D102 (GateKernel)
        x, s = saved
        B, c, H, W = x.shape
        dw = torch.empty_like(self.weight)
        db = None if self.bias is None else x.new_empty(c)
        _call("norm_backward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), self.weight, s, dy, dx, dw, db, B, c, H,
              W, self.weight.shape[-1], self.dilation)
        return (dw,) if db is None else (dw, db)


class SpatialGate(GateKernel):
    """Eq. 6, or CBAM (Eq. 8) with the channel MLP ``w1``, ``w2``; the forward updates the batch
    norm's running statistics in the kernel (``mode`` 1)."""

    def __init__(self, weight: torch.Tensor, bn: nn.BatchNorm2d, dilation: int,
                 channel_mlp: tuple[torch.Tensor, torch.Tensor] | None = None):
        self.mode = 2  # the running statistics
        if bn.training or bn.running_mean is None:
            self.mode = 0  # batch statistics
        if bn.training and bn.track_running_stats:
            self.mode = 1  # and their update, in the forward's kernel call
            # (the kernel writes the running statistics in place; no autograd graph holds them)
        self.weight, self.bn, self.dilation = weight.contiguous(), bn, dilation
        self.w1, self.w2 = (None, None) if channel_mlp is None else (channel_mlp[0].contiguous(),
                                                                     channel_mlp[1].contiguous())
        self.params = ((weight, bn.weight, bn.bias) if channel_mlp is None
                       else (*channel_mlp, weight, bn.weight, bn.bias))

    def forward(self, x, y):  # noqa: D102 (GateKernel)
        B, c, H, W = x.shape
        bn, h = self.bn, 0 if self.w1 is None else self.w1.shape[0]
        factor = count_batch(bn) if self.mode == 1 else 0.0  # the batch counts once it is computed
        work = x.new_empty(5 * B * H * W + 2 + (0 if self.w1 is None else 4 * B * c))  # see SpatialWork, ChannelWork
        _call("spatial_forward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), self.w1, self.w2, h, self.weight,
              bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps, factor, self.mode, y, work, B, c, H, W,
              self.weight.shape[-1], self.dilation)
        return x, work

    def backward(self, saved, dy, dx):  # noqa: D102 (GateKernel)
        x, work = saved
        B, c, H, W = x.shape
        w1, w2, h = self.w1, self.w2, 0 if self.w1 is None else self.w1.shape[0]
        dw, dbn = torch.empty_like(self.weight), x.new_empty(2)
        dw1, dw2 = (None, None) if w1 is None else (torch.empty_like(w1), torch.empty_like(w2))
        _call("spatial_backward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), w1, w2, h, self.weight, self.bn.weight,
              self.bn.eps, int(self.mode != 2), work, dy, dx, dw, dbn, dw1, dw2, B, c, H, W, self.weight.shape[-1],
              self.dilation)
        grads = (dw, dbn[:1], dbn[1:])
        return grads if w1 is None else (dw1, dw2, *grads)


class ChannelGate(GateKernel):
    """Eqs. 4, 5: ``x sigmoid(f(mean_P x) [+ f(max_P x)])``."""

    def __init__(self, w1: torch.Tensor, w2: torch.Tensor, with_max: bool):
        self.w1, self.w2, self.with_max = w1.contiguous(), w2.contiguous(), with_max
        self.params = (w1, w2)

    def forward(self, x, y):  # noqa: D102 (GateKernel)
        B, C, H, W = x.shape
        work = x.new_empty(4 * B * C)  # pooled, gate, argmax
        _call("channel_forward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), self.w1, self.w2, int(self.with_max), y,
              work, B, C, self.w1.shape[0], H * W)
        return x, work

    def backward(self, saved, dy, dx):  # noqa: D102 (GateKernel)
        x, work = saved
        B, C, H, W = x.shape
        dw1, dw2 = torch.empty_like(self.w1), torch.empty_like(self.w2)
        _call("channel_backward", KERNEL_DTYPES[x.dtype], x, _batch_stride(x), self.w1, self.w2, int(self.with_max),
              work, dy, dx, dw1, dw2, B, C, self.w1.shape[0], H * W)
        return dw1, dw2


class _Gate(torch.autograd.Function):
    """One :class:`GateKernel` as one autograd operation (one kernel call each way)."""

    @staticmethod
    def forward(ctx, kernel, x, *params):  # noqa: D102 (autograd protocol)
        y = x.new_empty(x.shape)
        ctx.save_for_backward(*kernel.forward(x, y))
        ctx.kernel = kernel
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, dy):  # noqa: D102 (autograd protocol)
        saved = ctx.saved_tensors
        dx = torch.empty(saved[0].shape, dtype=dy.dtype) if ctx.needs_input_grad[1] else None
        return None, dx, *ctx.kernel.backward(saved, dy.contiguous(), dx)


def gate_function(kernel: GateKernel, x: torch.Tensor) -> torch.Tensor:
    """``x g(x)`` of ``kernel`` as one differentiable operation, in ``x``'s memory format."""
    x, fmt = _planes(x)
    return _in_format(_Gate.apply(kernel, x, *kernel.params), fmt)


def normalization_attention(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                            dilation: int) -> torch.Tensor:
    """``x * sigmoid(dwconv(x))`` (AutoLA Eq. 7): depth-wise ``k x k`` filters ``weight``
    ``(c, 1, k, k)`` (``k`` odd), optional ``bias`` ``(c,)``, dilation ``d``, zero padding
    ``d (k - 1) / 2``; ``x`` is ``(B, c, H, W)``."""
    return gate_function(NormGate(weight, bias, dilation), x)


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
    return gate_function(SpatialGate(weight, bn, dilation, channel_mlp), x)


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
    return gate_function(ChannelGate(w1, w2, with_max), x)


def _channel(module: ChannelAttention | ChannelAttentionV2, x: torch.Tensor) -> GateKernel | None:
    w1, w2 = module.fc1.weight, module.fc2.weight
    return ChannelGate(w1, w2, with_max=module.with_max) if kernels_apply(x, w1, w2) else None


def _spatial(module: SpatialAttention, x: torch.Tensor) -> GateKernel | None:
    weight, bn = module.conv.weight, module.bn
    return SpatialGate(weight, bn, module.dilation) if spatial_attention_applies(x, weight, bn) else None


def _norm(module: NormalizationAttention, x: torch.Tensor) -> GateKernel | None:
    weight, bias = module.conv.weight, module.conv.bias
    return NormGate(weight, bias, module.dilation) if kernels_apply(x, weight, bias) else None


def _cbam(module: CBAM, x: torch.Tensor) -> GateKernel | None:
    ch, sp = module.channel, module.spatial
    mlp, weight, bn = (ch.fc1.weight, ch.fc2.weight), sp.conv.weight, sp.bn
    return SpatialGate(weight, bn, sp.dilation, mlp) if spatial_attention_applies(x, weight, bn, *mlp) else None


#: The modules the kernels compute (by exact type: a subclass may change the gate).
_BUILDERS = {ChannelAttention: _channel, ChannelAttentionV2: _channel, SpatialAttention: _spatial,
             NormalizationAttention: _norm, CBAM: _cbam}


def gate_kernel(module: nn.Module, x: torch.Tensor) -> GateKernel | None:
    """The compiled calls of ``module`` for input ``x``, or ``None`` where they do not run
    (building them has no side effect: a batch norm counts the batch when the kernel's forward
    runs)."""
    build = _BUILDERS.get(type(module))
    return None if build is None or not overrides.active("attention_gate") else build(module, x)


def attention_gate(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Override of the gated modules' ``forward`` (hook ``attention_gate``)."""
    kernel = gate_kernel(module, x)
    return NotImplemented if kernel is None else gate_function(kernel, x)


overrides.register("attention_gate", "attention_gates", attention_gate)
