"""Memory-format helpers for cells whose compiled kernels work on NCHW planes.

The compiled HOGA kernels (:mod:`attnas.ops.attention_gates`, :mod:`attnas.ops.hoga_gates`,
:mod:`attnas.ops.fused_phi`) read and write NCHW planes. In a channels-last network (the fast
layout of oneDNN's convolutions on the CPU) a cell therefore converts its input once, with
:func:`as_nchw`, whose backward converts the gradient back: the residual block before the
cell then gets its gradient in its own layout, where batch norm's and ReLU's backward take
their fast paths (with an NCHW gradient they were three times slower).
"""

from __future__ import annotations

import torch


def planes_contiguous(x: torch.Tensor) -> bool:
    """Whether every ``(H, W)`` plane of ``x`` ``(B, c, H, W)`` is contiguous and the planes of an
    image follow each other, with any batch stride (a channel slice of an NCHW tensor): the
    layout the compiled kernels read in place."""
    _, c, H, W = x.shape
    return all(n == 1 or s == want for n, s, want in zip((c, H, W), x.stride()[1:], (H * W, W, 1)))


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


def as_nchw(x: torch.Tensor) -> torch.Tensor:
    """``x`` NCHW-contiguous; when ``x`` is channels-last, its gradient is returned channels-last.

    Args:
        x: A ``(B, C, H, W)`` tensor.

    Returns:
        ``x`` itself when it is NCHW-contiguous or in another layout (then the kernels copy as
        they need); else an NCHW copy whose backward gives a channels-last gradient.
    """
    return _AsNCHW.apply(x) if is_channels_last(x) else x
