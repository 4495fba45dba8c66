"""Seeding and capturing every random number generator a run uses.

A resumed run must continue exactly as the uninterrupted one would, so checkpoints
store the state of Python's ``random``, NumPy's global generator and torch's CPU (and
CUDA) generators, and restore them on resume.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state(py_rng: random.Random | None = None) -> dict:
    """Capture the generators' states as checkpointable data."""
    np_state = np.random.get_state(legacy=False)
    np_state = {**np_state, "state": {"key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
                                      "pos": int(np_state["state"]["pos"])}}
    state = {
        "python": random.getstate(),
        "numpy": np_state,  # plain data and tensors only: checkpoints load with weights_only=True
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
    np_state = dict(state["numpy"])
    np_state["state"] = {"key": np.asarray(np_state["state"]["key"], dtype=np.uint32),
                         "pos": int(np_state["state"]["pos"])}
    np.random.set_state(np_state)
    torch.set_rng_state(state["torch"])
    if py_rng is not None and "py_rng" in state:
        py_rng.setstate(_to_tuple(state["py_rng"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def first_batch(task: Any, split: str) -> Any:
    """The first batch (of size 1 where the task batches) of ``split``, or ``None`` when it is empty.

    The random generators are left as they were.
    """
    saved = rng_state()
    try:
        return next(iter(task.batches(split, batch_size=1)), None)
    finally:
        set_rng_state(saved)
