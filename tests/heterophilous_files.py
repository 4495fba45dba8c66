"""Small graph files in Platonov et al.'s heterophilous .npz layout, written by tests."""

from __future__ import annotations

import numpy as np


def arrays(n=20, f=4, c=3, splits=10, seed=0):
    """A small graph in the layout: a ring plus chords, ten random 50/25/25 splits."""
    rng = np.random.default_rng(seed)
    edges = np.array([[i, (i + 1) % n] for i in range(n)] + [[i, (i + 7) % n] for i in range(0, n, 3)])
    masks = {k: np.zeros((splits, n), dtype=bool) for k in ("train", "val", "test")}
    for s in range(splits):
        order = rng.permutation(n)
        masks["train"][s, order[: n // 2]] = True
        masks["val"][s, order[n // 2: 3 * n // 4]] = True
        masks["test"][s, order[3 * n // 4:]] = True
    return {"node_features": rng.random((n, f), dtype=np.float32), "node_labels": np.arange(n) % c,
            "edges": edges.astype(np.int64), **{f"{k}_masks": v for k, v in masks.items()}}


def write(root, name="tiny", **change):
    """Write ``<root>/heterophilous/<name>.npz`` from :func:`arrays` with ``change`` (None: key left out)."""
    data = {**arrays(), **change}
    data = {k: v for k, v in data.items() if v is not None}
    (root / "heterophilous").mkdir(exist_ok=True)
    np.savez(root / "heterophilous" / f"{name}.npz", **data)
