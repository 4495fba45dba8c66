"""Tiny graphs in torch_geometric's raw Planetoid format, written by tests."""

from __future__ import annotations

import pickle
from collections import defaultdict

import numpy as np
import scipy.sparse

SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def write_planetoid_raw(raw, name="cora", train=6, unlabelled=514, test=10, features=5, classes=3, seed=0):
    """Write ``ind.<name>.*`` into ``raw``: a ring of ``train + unlabelled + test`` nodes.

    As in the published files, ``x``/``y`` hold the first ``train`` rows of ``allx``/``ally``,
    ``tx``/``ty`` the test nodes, listed in ``test.index`` in shuffled order after the others.
    Returns the node count. (``read_planetoid`` keeps 500 validation nodes after the training ones.)
    """
    rng = np.random.default_rng(seed)
    n_all = train + unlabelled
    n = n_all + test
    feats = (rng.random((n, features)) < 0.5).astype(np.float32)
    onehot = np.eye(classes, dtype=np.int32)[np.arange(n) % classes]
    order = rng.permutation(np.arange(n_all, n))
    objects = {
        "x": scipy.sparse.csr_matrix(feats[:train]), "allx": scipy.sparse.csr_matrix(feats[:n_all]),
        "tx": scipy.sparse.csr_matrix(feats[order]),
        "y": onehot[:train], "ally": onehot[:n_all], "ty": onehot[order],
        "graph": defaultdict(list, {i: [(i - 1) % n, (i + 1) % n] for i in range(n)}),
    }
    raw.mkdir(parents=True, exist_ok=True)
    for suffix, obj in objects.items():
        (raw / f"ind.{name}.{suffix}").write_bytes(pickle.dumps(obj, protocol=2))
    (raw / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in order))
    return n
