"""The running-statistics bookkeeping of ``nn.BatchNorm2d``, for kernels that compute batch norms.

The compiled spatial attention (:mod:`attnas.kernels.attention_gates`) and phi
(:mod:`attnas.kernels.fused_phi`) normalise with batch statistics themselves; they update the
running mean and variance as ``nn.BatchNorm2d`` does in training mode.
"""

from __future__ import annotations

import torch
from torch import nn


def count_batch(bn: nn.BatchNorm2d) -> float:
    """Count one training batch in ``bn.num_batches_tracked`` and return the weight of its
    statistics in the running averages: ``bn.momentum``, or ``1 / num_batches_tracked`` (the
    cumulative average) when the momentum is ``None``."""
    bn.num_batches_tracked.add_(1)  # an integer buffer: never part of an autograd graph
    return 1.0 / float(bn.num_batches_tracked) if bn.momentum is None else bn.momentum


def update_running(running_mean: torch.Tensor, running_var: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
                   n: int, factor: float) -> None:
    """Move the running statistics towards a batch's, in place, as ``nn.BatchNorm2d`` does:
    ``running = (1 - factor) running + factor batch``, with the batch's unbiased variance.

    Args:
        running_mean, running_var: The running statistics, updated in place.
        mean, var: The batch's mean and biased variance per channel.
        n: Values per channel in the batch (``B H W``).
        factor: The weight of the batch (the momentum, or :func:`count_batch`'s result).
    """
    with torch.no_grad():
        running_mean.mul_(1 - factor).add_(mean, alpha=factor)
        running_var.mul_(1 - factor).add_(var * (n / (n - 1)), alpha=factor)
