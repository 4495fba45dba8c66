"""Node classification on graphs with fixed repeated splits: heterophilous graphs and the cSBM.

The graphs of Platonov et al. (ICLR 2023; :mod:`attnas.data.heterophilous`) come with ten
fixed train/validation/test splits, and results are reported as the mean over the ten.
``task.split`` picks one (``0``..``9``) or lets the run decide:

- ``per-seed`` (the default): a search trains and selects on split ``seed mod S`` (the
  recipe's ``seed``), and retraining seed ``k`` (``attnas retrain``, every row of ``attnas
  compare``) trains and tests on split ``k mod S``. Ten retraining seeds cover the ten
  splits and every row of a comparison is trained on the same split for the same seed: the
  split is the pairing unit. The search itself has seen the labels of split ``seed``'s
  training and validation nodes, some of which are other splits' test nodes.
- ``search-seed``: everything of a run, the search and every retraining seed, uses split
  ``seed mod S``. With ``attnas compare --search-seeds 10`` each search seed searches,
  retrains and tests on its own split, so no architecture is chosen with labels of the
  nodes it is tested on, and the verdict pairs over the ten (search seed, split) pairs.

Everything else (full-batch training, loss, caching of the graph's normalised adjacencies)
is :class:`~attnas.tasks.node_classification.NodeClassificationTask`'s. The metric is
accuracy, or ROC-AUC of the class-1 probability on two-class graphs (Minesweeper, Tolokers,
as Platonov et al. report them). The ``csbm`` task draws a contextual SBM graph
(:mod:`attnas.data.csbm`) with ten dense splits and is scored by accuracy, as GPR-GNN does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import torch

from attnas.config.values import CheckedConfig, Range
from attnas.core.errors import ConfigError
from attnas.data.graphs import SPLITS, GraphDataset
from attnas.registry import register_task
from attnas.tasks.base import Task, TaskInfo
from attnas.tasks.node_classification import NodeBatch, NodeClassificationTask

PER_SEED = "per-seed"
SEARCH_SEED = "search-seed"


@dataclass(frozen=True)
class HeterophilousConfig(CheckedConfig):
    """Options of the ``heterophilous`` task.

    Attributes:
        dataset: The file stem: ``<data root>/heterophilous/<dataset>.npz`` (``texas``,
            ``wisconsin``, ``chameleon_filtered``, ``squirrel_filtered``, ``minesweeper``,
            ``tolokers``, or a user's file in the same layout).
        split: A fixed split index, ``per-seed`` (search: split ``seed mod S``; retraining
            seed ``k``: split ``k mod S``) or ``search-seed`` (search and retraining: split
            ``seed mod S``).
        normalize_features: Divide each node's features by their sum.
    """

    dataset: str = "texas"
    split: Annotated[int, Range(0)] | Literal["per-seed", "search-seed"] = PER_SEED
    normalize_features: bool = False


def roc_auc(scores: torch.Tensor, y: torch.Tensor) -> float:
    """ROC-AUC of the class-1 probability ``softmax(scores)[:, 1]`` against binary labels ``y``."""
    from sklearn.metrics import roc_auc_score

    if y.unique().numel() < 2:
        return 0.5
    return float(roc_auc_score(y.cpu().numpy(), scores.softmax(-1)[:, 1].cpu().numpy()))


class FixedSplitsTask(NodeClassificationTask):
    """A transductive node-classification task whose graph carries S fixed splits (``graph.split_masks``).

    Subclasses load :attr:`dataset` in :meth:`_load`; :meth:`select_split` chooses the split.
    """

    Config = HeterophilousConfig
    #: Score two-class graphs by ROC-AUC (else accuracy).
    two_class_auc: bool = True

    def __init__(self, options: Any = None, data_root: Path | None = None):
        from attnas.data.root import resolve_data_root

        Task.__init__(self, options, data_root)  # the parent's __init__ loads a registered dataset instead
        self.dataset: GraphDataset = self._load(data_root or resolve_data_root())
        self.num_splits = int(self.dataset.graph.split_masks["train"].size(0))
        split = self.options.split
        if split not in (PER_SEED, SEARCH_SEED) and split >= self.num_splits:
            raise ConfigError(f"task.split: {self.dataset.name} has {self.num_splits} splits (0..{self.num_splits - 1}), "
                              f"got {split}")
        self.metric = "roc_auc" if self.two_class_auc and self.dataset.num_classes == 2 else "accuracy"
        self.split_index = 0 if split in (PER_SEED, SEARCH_SEED) else split
        self._batches: dict[str, NodeBatch] = {}

    def _load(self, root: Path) -> GraphDataset:
        raise NotImplementedError

    @property
    def info(self) -> TaskInfo:
        ds = self.dataset
        return TaskInfo(kind="node", in_dim=ds.num_features, num_classes=ds.num_classes,
                        extra={"inductive": False, "dataset": ds.name, "split": self.split_index})

    @property
    def splits_per_seed(self) -> bool:
        """Whether retraining seed ``k`` trains and tests on its own split (``split: per-seed``)."""
        return self.options.split == PER_SEED and self.num_splits > 1

    def select_split(self, index: int, retraining: bool = False) -> None:
        """Use split ``index mod S`` from now on (``split: per-seed``; ``search-seed``: only when
        the run's task is built, not per retraining seed; a fixed split ignores it)."""
        if self.options.split not in (PER_SEED, SEARCH_SEED) or (retraining and self.options.split == SEARCH_SEED):
            return
        new = index % self.num_splits
        if new != self.split_index:
            self.split_index = new
            for split, batch in self._batches.items():  # the graph and its cache stay shared
                batch.mask = self.dataset.graph.split_masks[split][new].to(self.device)

    def _graph_batch(self, split: str) -> NodeBatch:
        if split not in self._batches:
            g = self.dataset.graph
            for s in SPLITS:
                g[f"{s}_mask"] = g.split_masks[s][self.split_index]
        return super()._graph_batch(split)

    def describe(self) -> str:
        return f"{self.dataset.summary()} (split {self.split_index} of {self.num_splits})"

    @torch.no_grad()
    def evaluate(self, forward: Callable[[Any], torch.Tensor], split: str, batch_size: int | None = None) -> float:
        if self.metric == "accuracy":
            return super().evaluate(forward, split, batch_size)
        batch = next(self.batches(split))
        return roc_auc(forward(batch)[batch.mask], batch.y[batch.mask])

    def with_dataset(self, dataset: str) -> FixedSplitsTask:
        from dataclasses import replace

        return type(self)(replace(self.options, dataset=dataset), self.data_root).to(self.device)


@register_task("heterophilous")
class HeterophilousTask(FixedSplitsTask):
    """Node classification on a graph in Platonov et al.'s layout, on its fixed splits."""

    name = "heterophilous"

    def _load(self, root: Path) -> GraphDataset:
        from attnas.data.heterophilous import load_heterophilous

        return load_heterophilous(root, self.options.dataset, self.options.normalize_features)


@dataclass(frozen=True)
class CSBMConfig(CheckedConfig):
    """Options of the ``csbm`` task (defaults: GPR-GNN's, Chien et al., ICLR 2021, Sec. 5).

    Attributes:
        phi: From -1 (heterophilous) through 0 (the graph carries no signal) to 1 (homophilous).
        n: Nodes.
        p: Feature size.
        d: Average degree.
        epsilon: Distance above the detection threshold.
        graph_seed: Seed of the graph and of its ten splits.
        split: A fixed split index, ``per-seed`` or ``search-seed`` (as the ``heterophilous`` task).
    """

    phi: Annotated[float, Range(-1, 1)] = 0.0
    n: Annotated[int, Range(4)] = 5000
    p: Annotated[int, Range(1)] = 2000
    d: Annotated[float, Range(0, low_open=True)] = 5.0
    epsilon: Annotated[float, Range(0)] = 3.25
    graph_seed: Annotated[int, Range(0)] = 0
    split: Annotated[int, Range(0)] | Literal["per-seed", "search-seed"] = PER_SEED


@register_task("csbm")
class CSBMTask(FixedSplitsTask):
    """Node classification on a contextual SBM graph (:mod:`attnas.data.csbm`), on its ten dense splits."""

    name = "csbm"
    Config = CSBMConfig
    two_class_auc = False  # GPR-GNN reports accuracy on the cSBM

    def _load(self, root: Path) -> GraphDataset:
        from attnas.data.csbm import load_csbm

        o = self.options
        return load_csbm(o.n, o.p, o.d, o.epsilon, o.phi, o.graph_seed)

    def with_dataset(self, dataset: str) -> FixedSplitsTask:
        raise ConfigError("task csbm draws its graph from task.phi and task.graph_seed; it cannot switch datasets")
