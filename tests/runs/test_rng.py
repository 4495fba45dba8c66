"""RNG capture: restorable, and loadable from a weights-only checkpoint."""

from __future__ import annotations

import random

import numpy as np
import torch

from attnas.runs.checkpoint_files import load_checkpoint_file, save_checkpoint_file
from attnas.runs.rng import rng_state, seed_everything, set_rng_state


def draw(r):
    return (random.random(), float(np.random.rand()), torch.rand(1).item(), r.random())


def test_state_round_trips_through_a_checkpoint(tmp_path):
    seed_everything(5)
    r = random.Random(9)
    draw(r)
    save_checkpoint_file(tmp_path / "c.ckpt", {"rng": rng_state(r)})
    expected = draw(r)
    seed_everything(123)
    r2 = random.Random(0)
    set_rng_state(load_checkpoint_file(tmp_path / "c.ckpt")["rng"], r2)
    assert draw(r2) == expected
