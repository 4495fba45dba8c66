"""Node classification: transductive (Planetoid, a user's graph) and inductive (PPI).

Transductive datasets train and evaluate on one graph with node masks, full batch
(one "epoch" is one step). Inductive datasets hold separate graphs per split; training
batches ``batch_graphs`` graphs at a time. Single-label tasks are scored by accuracy;
multi-label ones (PPI) by micro-averaged F1, as the AutoAttend paper reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from attnas import registry
from attnas.config import CheckedConfig, PositiveInt, Seed, check_keyword_options
from attnas.core.errors import ConfigError, unknown_name
from attnas.data.graphs import GraphDataset
from attnas.registry import register_task
from attnas.tasks.base import SPLITS, Task, TaskInfo


@dataclass(frozen=True)
class NodeClassificationConfig(CheckedConfig):
    """Options of the node-classification task.

    Attributes:
        dataset: A registered graph dataset: ``cora``, ``citeseer``, ``pubmed``, ``ppi``,
            ``digits-graph`` or ``graph-file`` (a user's ``torch.save``-d graph, see ``path``).
        path: The graph file for ``graph-file``.
        normalize_features: Row-normalise Planetoid features.
        split_seed: Seed of the split drawn for graphs without one.
        batch_graphs: Graphs per training step on inductive datasets.
        options: Extra keyword arguments for the dataset loader (e.g. ``{k: 10}`` for digits).
    """

    dataset: str = "cora"
    path: str = ""
    normalize_features: bool = True
    split_seed: Seed = 0
    batch_graphs: PositiveInt = 2
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class NodeBatch:
    """A batch of nodes to score: the graph(s) and which nodes count.

    Attributes:
        x: [N, F] node features.
        edge_index: [2, E] edges.
        y: [N] class ids or [N, C] multi-labels.
        mask: [N] bool nodes the loss/metric uses (``None``: all nodes).
        key: Identifies the graph.
        cache: Structures derived from the graph (normalised adjacencies), computed once.
    """

    x: torch.Tensor
    edge_index: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor | None
    key: str = ""
    cache: dict = field(default_factory=dict, repr=False)

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return self.x.size(0)

    def shard(self, rank: int, world_size: int) -> tuple[NodeBatch, float]:
        """This rank's part of the scored nodes, for data-parallel training on one graph.

        The scored nodes (``mask``, or all) are dealt out in turn: rank ``r`` gets the
        ``r``-th, ``r + world_size``-th, ... The graph, features and cache are shared.

        Returns:
            ``(the batch restricted to this rank's nodes, their share of the scored nodes)``.
        """
        idx = self.mask.nonzero().flatten() if self.mask is not None else torch.arange(self.num_nodes)
        mine = idx[rank::world_size]
        mask = torch.zeros(self.num_nodes, dtype=torch.bool, device=self.x.device)
        mask[mine] = True
        return (NodeBatch(self.x, self.edge_index, self.y, mask, key=self.key, cache=self.cache),
                mine.numel() / max(1, idx.numel()))

    @property
    def sparse_x(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """``(columns, row offsets, values)`` of ``x`` when under 20% of it is non-zero, else None.

        Bag-of-words features (Cora: 1.3% non-zero) are projected as a sparse CSR matrix
        built from this form, and input dropout acts on
        the non-zero values only (dropping a zero changes nothing).
        """
        if "sparse_x" not in self.cache:
            nz = self.x.count_nonzero().item()
            if nz > 0.2 * self.x.numel():
                self.cache["sparse_x"] = None
            else:
                rows, cols = self.x.nonzero(as_tuple=True)
                offsets = torch.searchsorted(rows, torch.arange(self.x.size(0), device=rows.device))
                self.cache["sparse_x"] = (cols, offsets, self.x[rows, cols])
        return self.cache["sparse_x"]


def micro_f1(logits: torch.Tensor, y: torch.Tensor) -> float:
    """Micro-averaged F1 of multi-label predictions (logit > 0)."""
    pred = logits > 0
    y = y > 0.5
    tp = (pred & y).sum().item()
    fp = (pred & ~y).sum().item()
    fn = (~pred & y).sum().item()
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


@register_task("node-classification")
class NodeClassificationTask(Task):
    """Node classification on a graph dataset (accuracy, or micro-F1 when multi-label)."""

    name = "node-classification"
    Config = NodeClassificationConfig

    def __init__(self, options: NodeClassificationConfig | None = None, data_root: Path | None = None):
        super().__init__(options, data_root)
        entry = registry.get_entry("dataset", self.options.dataset)
        if entry.group != "graph":
            graph_sets = registry.names("dataset", "graph")
            raise ConfigError(f"task.dataset: '{self.options.dataset}' is not a graph dataset; "
                              f"valid: {', '.join(graph_sets)}")
        kwargs = dict(self.options.options)
        check_keyword_options(entry.obj, kwargs, f"dataset '{self.options.dataset}'", "task.options",
                             reserved=("root", "normalize_features", "split_seed", "path"))
        kwargs.update(normalize_features=self.options.normalize_features, split_seed=self.options.split_seed)
        if self.options.path:
            kwargs["path"] = self.options.path
        from attnas.data.root import resolve_data_root

        self.dataset: GraphDataset = entry.obj(data_root or resolve_data_root(), **kwargs)
        self.metric = "micro_f1" if self.dataset.multilabel else "accuracy"
        self._batches: dict[str, NodeBatch] = {}

    @property
    def info(self) -> TaskInfo:
        ds = self.dataset
        return TaskInfo(kind="node", in_dim=ds.num_features, num_classes=ds.num_classes, multilabel=ds.multilabel,
                        extra={"inductive": ds.inductive, "dataset": ds.name})

    def to(self, device: torch.device | str) -> NodeClassificationTask:
        super().to(device)
        self._batches.clear()
        return self

    def describe(self) -> str:
        """One line about the data."""
        return self.dataset.summary()

    def _graph_batch(self, split: str) -> NodeBatch:
        if split not in self._batches:
            g = self.dataset.graph
            if not self._batches:
                self._graph_tensors = (g.x.to(self.device), g.edge_index.to(self.device), g.y.to(self.device), {})
            x, ei, y, cache = self._graph_tensors
            # the splits share the graph's tensors and its cache of derived structures
            self._batches[split] = NodeBatch(x, ei, y, g[f"{split}_mask"].to(self.device), key="graph", cache=cache)
        return self._batches[split]

    def batches(self, split: str, *, shuffle: bool = False, generator: torch.Generator | None = None,
                batch_size: int | None = None) -> Iterator[NodeBatch]:
        if split not in SPLITS:
            raise ConfigError(unknown_name("split", split, SPLITS))
        if not self.dataset.inductive:
            yield self._graph_batch(split)
            return
        from torch_geometric.data import Batch

        graphs = self.dataset.graphs[split]
        per = batch_size or (self.options.batch_graphs if split == "train" else len(graphs))
        order = torch.randperm(len(graphs), generator=generator).tolist() if shuffle else list(range(len(graphs)))
        for i in range(0, len(order), per):
            idx = order[i : i + per]
            b = Batch.from_data_list([graphs[j] for j in idx])
            yield NodeBatch(b.x.to(self.device), b.edge_index.to(self.device), b.y.to(self.device), None,
                            key=f"{split}:{','.join(map(str, idx))}")

    def loss(self, output: torch.Tensor, batch: NodeBatch) -> torch.Tensor:
        out, y = (output, batch.y) if batch.mask is None else (output[batch.mask], batch.y[batch.mask])
        if self.dataset.multilabel:
            return F.binary_cross_entropy_with_logits(out, y.float())
        return F.cross_entropy(out, y)

    @torch.no_grad()
    def evaluate(self, forward: Callable[[Any], torch.Tensor], split: str, batch_size: int | None = None) -> float:
        outs, ys = [], []
        for batch in self.batches(split, batch_size=batch_size):
            out = forward(batch)
            if batch.mask is not None:
                out, y = out[batch.mask], batch.y[batch.mask]
            else:
                y = batch.y
            outs.append(out)
            ys.append(y)
        out, y = torch.cat(outs), torch.cat(ys)
        if self.dataset.multilabel:
            return micro_f1(out, y)
        return (out.argmax(-1) == y).float().mean().item()

    def with_dataset(self, dataset: str) -> NodeClassificationTask:
        from dataclasses import replace

        return type(self)(replace(self.options, dataset=dataset, path=""), self.data_root).to(self.device)
