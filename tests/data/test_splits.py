"""Seeded hold-out and halves."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.data.splits import halves, holdout


def test_holdout_and_halves_partition():
    kept, held = holdout(101, 0.1, seed=3)
    assert len(held) == 10 and len(kept) == 91
    assert sorted(torch.cat([kept, held]).tolist()) == list(range(101))
    a, b = halves(kept, seed=4)
    assert len(a) == 46 and len(b) == 45
    assert not set(a.tolist()) & set(b.tolist()) and set(a.tolist()) | set(b.tolist()) == set(kept.tolist())
    assert torch.equal(holdout(101, 0.1, seed=3)[1], held)
    assert not torch.equal(holdout(101, 0.1, seed=5)[1], held)
    assert len(holdout(10, 0.0, seed=0)[1]) == 0


def test_bad_fractions():
    with pytest.raises(ConfigError):
        holdout(10, 1.0, 0)
    with pytest.raises(ConfigError, match="cannot hold out"):
        holdout(3, 0.01, 0)
