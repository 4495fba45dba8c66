"""The running-statistics bookkeeping of ``nn.BatchNorm2d``, for kernels that compute batch norms.

The compiled spatial attention (:mod:`attnas.ops.attention_gates`) and phi
(:mod:`attnas.ops.fused_phi`) normalise with batch statistics themselves; they update a batch
norm's running mean and variance as ``nn.BatchNorm2d`` does in training mode.
"""

from __future__ import annotations

import torch
from torch import nn


def count_batch(bn: nn.BatchNorm2d) -> float:
    """Count one training batch in ``bn.num_batches_tracked`` and return the weight of its
    statistics in the running averages: ``bn.momentum``, or ``1 / num_batches_tracked`` (the
    cumulative average) when the momentum is ``None``."""
    with torch.no_grad():
        bn.num_batches_tracked.add_(1)
    return 1.0 / float(bn.num_batches_tracked) if bn.momentum is None else bn.momentum
