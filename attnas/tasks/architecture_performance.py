"""Architecture performance: a table of architectures (as DAGs) with measured scores.

The data of Chatzianastasis et al.'s (2021) experiments (Sec. 4): the ENAS 6-layer dataset, 19,020
architectures with their weight-sharing CIFAR-10 accuracy, split 90/10 as D-VAE does
(:mod:`attnas.data.enas`). Graph VAEs learn from the DAGs; the scores are what latent-space
predictors and Bayesian optimisation aim at (metric ``accuracy``, a fraction).

No network is trained on this task: the scores are stored measurements, so
:meth:`batches`, :meth:`loss` and :meth:`evaluate` refuse with a message that says so.
Strategies that use it (``graph-vae``) read :attr:`ArchitecturePerformanceTask.train` and
:attr:`ArchitecturePerformanceTask.test`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import torch
from torch import Tensor

from attnas import registry
from attnas.config import CheckedConfig, Range, Seed
from attnas.core.errors import ConfigError, unknown_name
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.validity import is_valid_dag, is_valid_enas
from attnas.registry import register_task
from attnas.tasks.base import TaskInfo
from attnas.tasks.measured_scores import MeasuredScoresTask

#: D-VAE's validity test of decoded graphs for each dataset (Table 1's "validity").
_VALIDITY: dict[str, Callable[[DagBatch], Tensor]] = {"enas6": is_valid_enas}


@dataclass(frozen=True)
class ArchitecturePerformanceConfig(CheckedConfig):
    """Options of the architecture-performance task.

    Attributes:
        dataset: A registered dataset of the ``architectures`` group (``enas6``).
        split_seed: Seed of the shuffle before the split (D-VAE: 0).
        train_fraction: Fraction of the architectures in the training split (D-VAE: 0.9).
    """

    dataset: str = "enas6"
    split_seed: Seed = 0
    train_fraction: Annotated[float, Range(0, 1, low_open=True, high_open=True)] = 0.9


@register_task("architecture-performance")
class ArchitecturePerformanceTask(MeasuredScoresTask):
    """Architectures as DAGs with measured scores (ENAS 19,020, Chatzianastasis et al., 2021)."""

    name = "architecture-performance"
    Config = ArchitecturePerformanceConfig
    metric = "accuracy"
    instead = "no network is trained on it; use a strategy such as 'graph-vae'"

    def __init__(self, options: ArchitecturePerformanceConfig | None = None, data_root: Path | None = None):
        super().__init__(options, data_root)
        names = registry.names("dataset", "architectures")
        if self.options.dataset not in names:
            raise ConfigError(f"task.dataset: {unknown_name('architecture dataset', self.options.dataset, names)}")
        loader = registry.get("dataset", self.options.dataset)
        data = loader(data_root, seed=self.options.split_seed, train_fraction=self.options.train_fraction)
        self.train: DagDataset = data.train
        self.test: DagDataset = data.test

    @property
    def everything(self) -> DagDataset:
        """Training and test architectures together (training first)."""
        return DagDataset(DagBatch.cat([self.train.graphs, self.test.graphs]), torch.cat([self.train.y, self.test.y]),
                          self.train.vocab)

    @property
    def info(self) -> TaskInfo:
        return TaskInfo(kind="architectures", in_dim=self.train.num_types, num_classes=1,
                        extra={"dataset": self.options.dataset, "max_nodes": self.train.max_nodes,
                               "train": len(self.train), "test": len(self.test)})

    def is_valid(self, graphs: DagBatch) -> Tensor:
        """D-VAE's validity test of decoded graphs for this dataset (``(G,)`` bool)."""
        return _VALIDITY.get(self.options.dataset, is_valid_dag)(graphs)
