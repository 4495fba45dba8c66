"""Inverted dropout with a uniform-threshold mask.

Same distribution as :func:`torch.nn.functional.dropout` (each element kept with
probability ``1 - p`` and scaled by ``1 / (1 - p)``), but the mask comes from
``rand_like(x) >= p``, which on CPU is about 3x faster than the ``bernoulli_`` kernel
``F.dropout`` uses (measured: 18 ms vs 78 ms for a 2708 x 1433 tensor on two cores).
The mask is built in place as a float tensor (``rand >= p`` as 1.0 / 0.0, times
``1 / (1 - p)``) and applied with one multiplication: bit for bit the result of
``x * (rand >= p) * (1 / (1 - p))`` (the same random numbers, the same rounding) without
the boolean temporary, its conversion to float and a second pass over ``x``.
"""

from __future__ import annotations

import torch
from torch import nn


def fast_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout of ``x`` with drop probability ``p``."""
    if not training or p <= 0.0:
        return x
    if p >= 1.0:
        return torch.zeros_like(x)
    return x * torch.rand_like(x).ge_(p).mul_(1.0 / (1.0 - p))


class FastDropout(nn.Module):
    """Module form of :func:`fast_dropout`.

    Args:
        p: Drop probability.
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fast_dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
