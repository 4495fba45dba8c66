"""Kernel ``channels_last_grad``: :func:`~attnas.ops.autola.memory_format.as_nchw` whose
backward returns the gradient in the input's channels-last layout. Pure PyTorch.

The HOGA cell (AutoLA Eqs. 2-3) computes its gates on NCHW planes. In a channels-last network
the readable ``x.contiguous()`` hands the residual block before the cell an NCHW gradient,
and that block's batch norm and ReLU backward then run about three times slower on the CPU.
Overrides the hook ``as_nchw`` for channels-last CPU tensors (elsewhere the readable path
runs): the forward is the same copy, the backward converts the gradient back to channels-last.
Values are equal bit for bit; only the gradient's memory layout differs.
"""

from __future__ import annotations

import torch

from attnas.ops import overrides
from attnas.ops.autola.memory_format import is_channels_last


class _AsNCHW(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # noqa: D102 (autograd protocol)
        return x.contiguous()

    @staticmethod
    def backward(ctx, grad):  # noqa: D102 (autograd protocol)
        return grad.contiguous(memory_format=torch.channels_last)


def as_nchw(x: torch.Tensor) -> torch.Tensor:
    """Override of :func:`attnas.ops.autola.memory_format.as_nchw` (channels-last CPU input only)."""
    if not x.is_cpu or not is_channels_last(x):
        return NotImplemented
    return _AsNCHW.apply(x)


overrides.register("as_nchw", "channels_last_grad", as_nchw)
