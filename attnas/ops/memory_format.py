"""Memory-format helpers for cells whose compiled kernels work on NCHW planes.

The compiled HOGA kernels (:mod:`attnas.ops.attention_gates`, :mod:`attnas.ops.hoga_gates`,
:mod:`attnas.ops.fused_phi`) read and write NCHW planes. In a channels-last network (the fast
layout of oneDNN's convolutions on the CPU) a cell therefore converts its input once, with
:func:`as_nchw`, whose backward converts the gradient back: the residual block before the
cell then gets its gradient in its own layout, where batch norm's and ReLU's backward take
their fast paths (with an NCHW gradient they were three times slower).

On CPU float32 / float64 tensors both conversions run in the compiled kernel of
:mod:`attnas.ops._layout_kernel` (register transposes; PyTorch's strided copy is element by
element), and :func:`split_nchw` gives the cell its channel groups as separate NCHW tensors,
so that the backward writes their gradients straight into one channels-last tensor instead of
concatenating them first and converting after.
"""

from __future__ import annotations

import torch

from attnas.ops import _layout_kernel
from attnas.ops._compiled import KERNEL_DTYPES, pointer_table


def planes_contiguous(x: torch.Tensor) -> bool:
    """Whether every ``(H, W)`` plane of ``x`` ``(B, c, H, W)`` is contiguous and the planes of an
    image follow each other, with any batch stride (a channel slice of an NCHW tensor): the
    layout the compiled kernels read in place."""
    _, c, H, W = x.shape
    return all(n == 1 or s == want for n, s, want in zip((c, H, W), x.stride()[1:], (H * W, W, 1)))


def is_channels_last(x: torch.Tensor) -> bool:
    """Whether ``x`` is in channels-last memory format (and not also NCHW-contiguous)."""
    return x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()


def layout_kernel_applies(x: torch.Tensor) -> bool:
    """Whether the compiled layout kernel runs for ``x`` (CPU float32 / float64, library built)."""
    return x.is_cpu and x.dtype in KERNEL_DTYPES and _layout_kernel.load() is not None


def _call(name: str, *args) -> None:
    _layout_kernel.LIBRARY.call(f"attnas_{name}", *args, torch.get_num_threads())


def cl_to_groups(x: torch.Tensor, group_channels: int) -> list[torch.Tensor]:
    """The channel groups of the channels-last CPU float ``x`` as new NCHW tensors (the compiled
    transpose, outside autograd; :func:`split_nchw` is the differentiable form)."""
    B, C, H, W = x.shape
    groups = [x.new_empty(B, group_channels, H, W) for _ in range(C // group_channels)]
    _call("cl_to_groups", KERNEL_DTYPES[x.dtype], x, pointer_table(groups), B, H * W, C, group_channels)
    return groups


def groups_to_cl(groups: list[torch.Tensor | None], shape: torch.Size) -> torch.Tensor:
    """The NCHW-contiguous channel groups ``groups`` (``None``: zeros; at least one given) as one
    channels-last tensor of ``shape`` (the inverse of :func:`cl_to_groups`)."""
    B, C, H, W = shape
    ref = next(g for g in groups if g is not None)
    out = torch.empty(shape, dtype=ref.dtype, memory_format=torch.channels_last)
    _call("groups_to_cl", KERNEL_DTYPES[ref.dtype], pointer_table(groups), out, B, H * W, C, C // len(groups))
    return out


class _AsNCHW(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # noqa: D102 (autograd protocol)
        return x.contiguous()

    @staticmethod
    def backward(ctx, grad):  # noqa: D102 (autograd protocol)
        return grad.contiguous(memory_format=torch.channels_last)


class _SplitNCHW(torch.autograd.Function):
    """Channels-last ``x`` -> its channel groups as NCHW tensors, in the compiled kernel."""

    @staticmethod
    def forward(ctx, x, group_channels):  # noqa: D102 (autograd protocol)
        groups = cl_to_groups(x, group_channels)
        ctx.set_materialize_grads(False)  # an unused group's gradient stays None: zeros in the kernel
        ctx.shape, ctx.group_channels = x.shape, group_channels
        return tuple(groups)

    @staticmethod
    def backward(ctx, *grads):  # noqa: D102 (autograd protocol)
        if all(g is None for g in grads):
            return None, None
        return groups_to_cl([None if g is None else g.contiguous() for g in grads], ctx.shape), None


class _ToChannelsLast(torch.autograd.Function):
    """NCHW ``y`` -> channels-last, in the compiled kernel (the backward: the gradient to NCHW)."""

    @staticmethod
    def forward(ctx, y):  # noqa: D102 (autograd protocol)
        return groups_to_cl([y], y.shape)  # one group: all the channels

    @staticmethod
    def backward(ctx, grad):  # noqa: D102 (autograd protocol)
        return cl_to_groups(grad.contiguous(memory_format=torch.channels_last), grad.shape[1])[0]


def as_channels_last(y: torch.Tensor) -> torch.Tensor:
    """``y.contiguous(memory_format=torch.channels_last)``; for an NCHW-contiguous CPU float ``y``
    (a kernel's output going back to a channels-last network) by the compiled transpose, both
    ways, instead of PyTorch's element-by-element strided copy."""
    if (y.dim() == 4 and y.is_contiguous() and not y.is_contiguous(memory_format=torch.channels_last)
            and layout_kernel_applies(y)):
        return _ToChannelsLast.apply(y)
    return y.contiguous(memory_format=torch.channels_last)


def split_nchw(x: torch.Tensor, group_channels: int) -> tuple[torch.Tensor, ...]:
    """The channel groups of ``x`` (``group_channels`` each), as NCHW tensors.

    For a channels-last ``x`` on the CPU, one compiled transpose writes the groups as separate
    NCHW tensors, and the backward writes their gradients into one channels-last tensor (no
    concatenation); otherwise ``torch.split(as_nchw(x), group_channels, 1)``: off the CPU,
    where no kernel reads the planes, views of ``x`` in its own layout.

    Args:
        x: A ``(B, C, H, W)`` tensor, ``C`` a multiple of ``group_channels``.
        group_channels: Channels per group.

    Returns:
        ``C / group_channels`` tensors ``(B, group_channels, H, W)``, with contiguous planes on
        the CPU.
    """
    if is_channels_last(x) and x.shape[1] % group_channels == 0 and layout_kernel_applies(x):
        return _SplitNCHW.apply(x, group_channels)
    return torch.split(as_nchw(x), group_channels, 1)


def as_nchw(x: torch.Tensor) -> torch.Tensor:
    """``x`` NCHW-contiguous; when ``x`` is channels-last, its gradient is returned channels-last.

    Args:
        x: A ``(B, C, H, W)`` tensor.

    Returns:
        ``x`` itself when it is NCHW-contiguous or in another layout (then the kernels copy as
        they need), or off the CPU (no compiled kernel reads it there); else an NCHW copy whose
        backward gives a channels-last gradient (both conversions in the compiled kernel on CPU
        float tensors).
    """
    if x.device.type != "cpu" or not is_channels_last(x):
        return x
    if layout_kernel_applies(x):
        return _SplitNCHW.apply(x, x.shape[1])[0]
    return _AsNCHW.apply(x)
