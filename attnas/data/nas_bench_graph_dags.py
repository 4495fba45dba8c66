"""NAS-Bench-Graph's architectures as DAGs with their validation performance, for graph VAEs.

Datasets ``nbg-<dataset>`` of the ``architectures`` group (task ``architecture-performance``):
every architecture of the space (:mod:`attnas.spaces.nas_bench_graph`; 26,206, or 2,021 for
``nbg-proteins``) as its DAG (input, four nodes, output) with the **validation** performance
of the benchmark's table (:mod:`attnas.data.nas_bench_graph`) as its value, shuffled with
``random.Random(seed)`` and split ``train_fraction`` / rest as D-VAE splits ENAS. The test
column is not used: graph VAEs and latent-space predictors learn validation performance.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from attnas.core.errors import DataError
from attnas.data.nas_bench_graph import DATASETS, load_table
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.space_dags import space_dataset
from attnas.registry import register_dataset
from attnas.spaces.nas_bench_graph import NasBenchGraphConfig, NasBenchGraphSpace


@dataclass
class NasBenchGraphDags:
    """The split DAGs of one dataset.

    Attributes:
        train: Training DAGs with validation performance.
        test: Held-out DAGs with validation performance.
    """

    train: DagDataset
    test: DagDataset


def load_dags(dataset: str, seed: int = 0, train_fraction: float = 0.9) -> NasBenchGraphDags:
    """Every architecture of ``dataset``'s table as a DAG valued by its validation performance.

    Raises:
        DataError: A bad fraction, or the tables' package missing.
    """
    if not 0.0 < train_fraction < 1.0:
        raise DataError(f"nbg-{dataset}: train_fraction must be in (0, 1), got {train_fraction}")
    space = NasBenchGraphSpace(NasBenchGraphConfig(operations="proteins" if dataset == "proteins" else "all"))
    table = load_table(dataset)
    valid = dict(zip(table.codes.tolist(), table.valid.tolist()))
    order = list(range(len(space.index)))
    random.Random(seed).shuffle(order)
    archs = [space.arch_at(i) for i in order]
    full = space_dataset(space, archs, y=[valid[space.index.codes[i]] for i in order])
    n_train = int(len(order) * train_fraction)
    return NasBenchGraphDags(full.subset(range(n_train)), full.subset(range(n_train, len(order))))


def _register(dataset: str) -> None:
    def load(data_dir: str | Path | None = None, *, seed: int = 0, train_fraction: float = 0.9) -> NasBenchGraphDags:
        return load_dags(dataset, seed, train_fraction)

    load.__doc__ = f"NAS-Bench-Graph's architectures as DAGs with their {dataset} validation performance."
    register_dataset(f"nbg-{dataset}", group="architectures", help=load.__doc__)(load)


for _name in DATASETS:
    _register(_name)
