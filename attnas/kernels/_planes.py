"""The memory layout the compiled kernels read in place: contiguous ``(H, W)`` planes."""

from __future__ import annotations

import torch


def planes_contiguous(x: torch.Tensor) -> bool:
    """Whether every ``(H, W)`` plane of ``x`` ``(B, c, H, W)`` is contiguous and the planes of an
    image follow each other, with any batch stride (a channel slice of an NCHW tensor): the
    layout the compiled kernels read in place."""
    _, c, H, W = x.shape
    return all(n == 1 or s == want for n, s, want in zip((c, H, W), x.stride()[1:], (H * W, W, 1)))
