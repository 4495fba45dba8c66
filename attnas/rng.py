"""Seeding and capturing every random number generator a run uses.

A resumed run must continue exactly as the uninterrupted one would, so checkpoints
store the state of Python's ``random``, NumPy's global generator and torch's CPU (and
CUDA) generators, and restore them on resume.
"""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state(py_rng: random.Random | None = None) -> dict:
    """Capture the generators' states as checkpointable data."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(legacy=False),
        "torch": torch.get_rng_state(),
    }
    if py_rng is not None:
        state["py_rng"] = py_rng.getstate()
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _to_tuple(x):
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def set_rng_state(state: dict, py_rng: random.Random | None = None) -> None:
    """Restore states captured by :func:`rng_state`."""
    random.setstate(_to_tuple(state["python"]))
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if py_rng is not None and "py_rng" in state:
        py_rng.setstate(_to_tuple(state["py_rng"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
