"""Memory-format helpers for cells that work on NCHW channel groups.

A HOGA cell (AutoLA Eqs. 2-3; Ma et al., NeurIPS 2020) splits its input into channel groups
and computes its gates on NCHW planes; :func:`as_nchw` gives it an NCHW tensor.
"""

from __future__ import annotations

import torch


def is_channels_last(x: torch.Tensor) -> bool:
    """Whether ``x`` is in channels-last memory format (and not also NCHW-contiguous)."""
    return x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()


def as_nchw(x: torch.Tensor) -> torch.Tensor:
    """``x`` NCHW-contiguous (``x`` itself when it already is).

    Args:
        x: A ``(B, C, H, W)`` tensor.

    Returns:
        ``x.contiguous()``.
    """
    return x.contiguous()


def split_nchw(x: torch.Tensor, group_channels: int) -> tuple[torch.Tensor, ...]:
    """The channel groups of ``x`` (``group_channels`` each): ``torch.split(as_nchw(x), group_channels, 1)``.

    Args:
        x: A ``(B, C, H, W)`` tensor, ``C`` a multiple of ``group_channels``.
        group_channels: Channels per group.

    Returns:
        ``C / group_channels`` tensors ``(B, group_channels, H, W)``.
    """
    return torch.split(as_nchw(x), group_channels, 1)
