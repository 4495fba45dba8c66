"""Shared test set-up: point ATTNAS_DATA at ../shared/data when it exists, keep torch small, never download."""

from __future__ import annotations

import os
from pathlib import Path

# Idle OpenMP threads sleep instead of spinning: on a shared, loaded machine spinning threads
# slowed small torch ops by up to 70x. Must be set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Ray starts its workers at niceness 15: beside the other pytest-xdist worker (niceness 0)
# they would get almost no CPU. The tests' Rays (also their child processes') run at 0.
os.environ.setdefault("RAY_worker_niceness", "0")

import pytest  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()

# Tests never download a dataset: a missing named dataset is reported, not fetched
# (tests of the download path unset this and replace torch_geometric's download).
os.environ["ATTNAS_OFFLINE"] = "1"

if "ATTNAS_DATA" not in os.environ and SHARED_DATA.exists():
    os.environ["ATTNAS_DATA"] = str(SHARED_DATA)

# Under pytest-xdist (``-n 2``) each worker is a process of its own: one thread each keeps the
# workers from competing for the same cores.
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else min(2, torch.get_num_threads()))


def shared_data() -> Path | None:
    """The real data root, or None when it is not available."""
    root = os.environ.get("ATTNAS_DATA")
    return Path(root) if root and Path(root).exists() else None


@pytest.fixture
def restore_torch_threads():
    """Give torch its thread count back after the test (which may change it)."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 worker CPUs (no dashboard) for the module, as a RayExecutor; skips without Ray.

    Started once per test module and shut down at its end; the pipeline's executors find it
    running and reuse it.
    """
    ray = pytest.importorskip("ray")
    from attnas.scale import parallel

    ex = parallel.RayExecutor(workers=2)
    try:
        yield ex
    finally:
        ex.close()
        assert not ray.is_initialized()


@pytest.fixture
def data_root() -> Path:
    """The real data root; skips the test when ../shared/data is absent."""
    root = shared_data()
    if root is None:
        pytest.skip("real data not available (set ATTNAS_DATA)")
    return root

os.environ.setdefault("ATTNAS_PROGRESS", "0")


def _write_ppi(root, graphs_per_split=(3, 1, 1), nodes=6, feats=5, labels=4, seed=0):
    """Write a tiny PPI dataset in torch_geometric's raw layout under ``root/PPI/raw``."""
    import json

    import numpy as np

    rng = np.random.default_rng(seed)
    raw = root / "PPI" / "raw"
    raw.mkdir(parents=True)
    gid = 1
    for split, count in zip(("train", "valid", "test"), graphs_per_split):
        n = count * nodes
        links, ids = [], []
        for g in range(count):
            base = g * nodes
            for i in range(nodes - 1):
                links.append({"source": base + i, "target": base + i + 1})
            ids += [gid] * nodes
            gid += 1
        doc = {"directed": False, "multigraph": False, "graph": {},
               "nodes": [{"id": i} for i in range(n)], "links": links}
        (raw / f"{split}_graph.json").write_text(json.dumps(doc))
        np.save(raw / f"{split}_feats.npy", rng.normal(size=(n, feats)).astype(np.float32))
        np.save(raw / f"{split}_labels.npy", rng.integers(0, 2, size=(n, labels)).astype(np.float32))
        np.save(raw / f"{split}_graph_id.npy", np.array(ids))
    return raw


@pytest.fixture
def write_ppi(tmp_path, monkeypatch):
    """A writer of tiny PPI files; the processed cache goes under tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return _write_ppi


TINY_DIGITS_RECIPE = {
    "name": "tiny-digits",
    "seed": 0,
    "task": {"name": "node-classification", "dataset": "digits-graph"},
    "space": {"name": "autoattend", "layers": 2, "hidden": 16, "pool": "pyg",
              "ops": ["zero", "identity", "gcn", "sage", "gat_2", "linear", "sg"], "dropout": 0.5,
              "attn_dropout": 0.3},
    "strategy": {"name": "one-shot-evolution",
                 "supernet": {"epochs": 40, "checkpoint_every": 10},
                 "evolution": {"population": 30, "parents": 6, "children": 6, "rounds": 3, "checkpoint_every": 7},
                 "rerank": {"top_k": 3, "epochs": 3}},
    "retrain": {"epochs": 20, "patience": 0, "init": "supernet", "seeds": 2},
}


@pytest.fixture(scope="session")
def tiny_recipe_data():
    """The tiny digits recipe as a mapping (a fresh copy)."""
    import copy

    return copy.deepcopy(TINY_DIGITS_RECIPE)


@pytest.fixture
def tiny_recipe(tmp_path):
    """A YAML recipe of a seconds-long AutoAttend search on the digits graph."""
    import yaml

    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump(TINY_DIGITS_RECIPE))
    return p
