"""Seeded index splits of a training set.

``holdout`` reserves a validation share; ``halves`` cuts the rest into the two disjoint
halves ``train_A`` (weights) and ``train_B`` (architecture) of first-order DARTS (AutoLA
Sec. 3.3: "we randomly split the training set ... into two parts evenly").
"""

from __future__ import annotations

import torch

from attnas.core.errors import ConfigError


def _perm(n: int, seed: int) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))


def holdout(n: int, fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``range(n)`` into ``(kept, held_out)``, ``held_out`` being ``round(fraction * n)`` indices.

    Both are sorted. ``fraction`` 0 holds out nothing.
    """
    if not 0 <= fraction < 1:
        raise ConfigError(f"hold-out fraction must be in [0, 1), got {fraction}")
    n_out = int(round(fraction * n))
    if fraction > 0 and (n_out == 0 or n_out == n):
        raise ConfigError(f"cannot hold out {fraction:.0%} of {n} examples and keep both parts non-empty")
    perm = _perm(n, seed)
    return perm[n_out:].sort().values, perm[:n_out].sort().values


def halves(indices: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``indices`` at random into two halves (the first gets the odd one out)."""
    if indices.numel() < 2:
        raise ConfigError(f"cannot split {indices.numel()} training examples into two halves")
    perm = indices[_perm(indices.numel(), seed)]
    cut = (indices.numel() + 1) // 2
    return perm[:cut].sort().values, perm[cut:].sort().values
