"""Memory-format helpers for cells that work on NCHW channel groups.

A HOGA cell (AutoLA Eqs. 2-3) splits its input into channel groups. In a channels-last network
(the fast layout of oneDNN's convolutions on the CPU) the cell converts its input once, with
:func:`as_nchw`, whose backward converts the gradient back: the residual block before the cell
then gets its gradient in its own layout, where batch norm's and ReLU's backward take their fast
paths (with an NCHW gradient they were three times slower).
"""

from __future__ import annotations

import torch

from attnas.ops.overrides import overridable


def is_channels_last(x: torch.Tensor) -> bool:
    """Whether ``x`` is in channels-last memory format (and not also NCHW-contiguous)."""
    return x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()


class _AsNCHW(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # noqa: D102 (autograd protocol)
        return x.contiguous()

    @staticmethod
    def backward(ctx, grad):  # noqa: D102 (autograd protocol)
        return grad.contiguous(memory_format=torch.channels_last)


@overridable("as_nchw")
def as_nchw(x: torch.Tensor) -> torch.Tensor:
    """``x`` NCHW-contiguous; when ``x`` is channels-last, its gradient is returned channels-last.

    Args:
        x: A ``(B, C, H, W)`` tensor.

    Returns:
        ``x`` itself when it is NCHW-contiguous, in another layout, or off the CPU; else an
        NCHW copy whose backward gives a channels-last gradient.
    """
    if x.device.type != "cpu" or not is_channels_last(x):
        return x
    return _AsNCHW.apply(x)


@overridable("split_nchw")
def split_nchw(x: torch.Tensor, group_channels: int) -> tuple[torch.Tensor, ...]:
    """The channel groups of ``x`` (``group_channels`` each): ``torch.split(as_nchw(x), group_channels, 1)``.

    Args:
        x: A ``(B, C, H, W)`` tensor, ``C`` a multiple of ``group_channels``.
        group_channels: Channels per group.

    Returns:
        ``C / group_channels`` tensors ``(B, group_channels, H, W)``.
    """
    return torch.split(as_nchw(x), group_channels, 1)
