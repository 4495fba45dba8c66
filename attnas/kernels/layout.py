"""Kernel ``layout``: channels-last <-> NCHW channel groups by register transposes.

A channels-last ``(B, C, H, W)`` tensor holds, per image, a ``P x C`` matrix (``P = H W``); its
NCHW channel groups are ``c x P`` blocks of the transpose. PyTorch's strided copy converts element
by element; ``csrc/layout.cpp`` transposes ``L x L`` blocks in registers and writes the groups as
separate NCHW tensors (and back), so that the HOGA cell's backward writes its groups' gradients
straight into one channels-last tensor. Overrides :func:`attnas.ops.memory_format.as_nchw` and
:func:`~attnas.ops.memory_format.split_nchw`; :func:`as_channels_last` serves the other kernels.
"""

from __future__ import annotations

import ctypes

import torch

from attnas.kernels._build import KERNEL_DTYPES, Library, pointer_table
from attnas.ops import overrides
from attnas.ops.memory_format import is_channels_last

_ARGS = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 4, ctypes.c_int]
LIBRARY = Library("layout", {"attnas_cl_to_groups": _ARGS, "attnas_groups_to_cl": _ARGS})


def planes_contiguous(x: torch.Tensor) -> bool:
    """Whether every ``(H, W)`` plane of ``x`` ``(B, c, H, W)`` is contiguous and the planes of an
    image follow each other, with any batch stride (a channel slice of an NCHW tensor): the
    layout the compiled kernels read in place."""
    _, c, H, W = x.shape
    return all(n == 1 or s == want for n, s, want in zip((c, H, W), x.stride()[1:], (H * W, W, 1)))


def layout_kernel_applies(x: torch.Tensor) -> bool:
    """Whether the layout kernel runs for ``x`` (on, CPU float32 / float64, library built)."""
    return (x.is_cpu and x.dtype in KERNEL_DTYPES and overrides.active("split_nchw")
            and LIBRARY.load() is not None)


def _call(name: str, *args) -> None:
    LIBRARY.call(f"attnas_{name}", *args, torch.get_num_threads())


def cl_to_groups(x: torch.Tensor, group_channels: int) -> list[torch.Tensor]:
    """The channel groups of the channels-last CPU float ``x`` as new NCHW tensors (outside autograd)."""
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
    (a kernel's output going back to a channels-last network) by the compiled transpose, both ways."""
    if (y.dim() == 4 and y.is_contiguous() and not y.is_contiguous(memory_format=torch.channels_last)
            and layout_kernel_applies(y)):
        return _ToChannelsLast.apply(y)
    return y.contiguous(memory_format=torch.channels_last)


def split_nchw(x: torch.Tensor, group_channels: int) -> tuple[torch.Tensor, ...]:
    """Override of :func:`attnas.ops.memory_format.split_nchw` for channels-last CPU float ``x``:
    one transpose writes the groups as separate NCHW tensors."""
    if is_channels_last(x) and x.shape[1] % group_channels == 0 and layout_kernel_applies(x):
        return _SplitNCHW.apply(x, group_channels)
    return NotImplemented


def as_nchw(x: torch.Tensor) -> torch.Tensor:
    """Override of :func:`attnas.ops.memory_format.as_nchw` for channels-last CPU float ``x``."""
    if x.device.type == "cpu" and is_channels_last(x) and layout_kernel_applies(x):
        return _SplitNCHW.apply(x, x.shape[1])[0]
    return NotImplemented


overrides.register("split_nchw", "layout", split_nchw)
overrides.register("as_nchw", "layout", as_nchw)
