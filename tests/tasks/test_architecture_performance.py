"""The architecture-performance task: ENAS DAGs with scores, split as D-VAE, no model training."""

from __future__ import annotations

import random

import pytest
import torch

from attnas.core.errors import ConfigError, DataError, UnsupportedError
from attnas.tasks.architecture_performance import ArchitecturePerformanceConfig, ArchitecturePerformanceTask


def write_enas(root, n, seed=0):
    rng = random.Random(seed)
    lines = []
    for _ in range(1000 + n):  # the loader skips the first 1,000 lines, as D-VAE
        rows = [[rng.randrange(6)] + [rng.randrange(2) for _ in range(k)] for k in range(6)]
        lines.append(f"{rows}, {0.7 + 0.01 * rng.random():.4f}\n")
    (root / "enas").mkdir(parents=True)
    (root / "enas" / "final_structures6.txt").write_text("".join(lines))


def test_splits_scores_and_validity(tmp_path):
    write_enas(tmp_path, 50)
    task = ArchitecturePerformanceTask(ArchitecturePerformanceConfig(train_fraction=0.8), tmp_path)
    assert (len(task.train), len(task.test)) == (40, 10)
    assert task.info.kind == "architectures" and task.info.in_dim == 8 and task.metric == "accuracy"
    every = task.everything
    assert len(every) == 50 and torch.equal(every.y[:40], task.train.y)
    assert bool(task.is_valid(task.train.graphs).all())  # D-VAE's ENAS test accepts the data itself
    broken = task.train.graphs.index([0])
    broken.adj[0, 2, 3] = False  # drop a chain edge
    assert not bool(task.is_valid(broken)[0])


def test_refusals_name_the_problem(tmp_path):
    with pytest.raises(DataError, match="final_structures6.txt"):
        ArchitecturePerformanceTask(ArchitecturePerformanceConfig(), tmp_path)
    with pytest.raises(ConfigError, match="unknown architecture dataset 'enas7'"):
        ArchitecturePerformanceTask(ArchitecturePerformanceConfig(dataset="enas7"), tmp_path)
    with pytest.raises(ConfigError, match="train_fraction"):
        ArchitecturePerformanceConfig(train_fraction=1.0)
    write_enas(tmp_path, 20)
    task = ArchitecturePerformanceTask(None, tmp_path)
    with pytest.raises(UnsupportedError, match="measured scores"):
        next(iter(task.batches("train")))
    with pytest.raises(UnsupportedError, match="no model evaluation"):
        task.evaluate(lambda b: b, "val")
