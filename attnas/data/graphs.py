"""Graph datasets for node classification, and the checks every graph passes.

A :class:`GraphDataset` is either *transductive* (one graph whose nodes carry
``train_mask`` / ``val_mask`` / ``test_mask``, as Planetoid) or *inductive* (separate
lists of graphs per split, as PPI). Every graph, whatever its source, goes through
:func:`validate_graph`, which names the first problem it finds (shape mismatch, NaN
features, labels out of range, edges pointing past the last node, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from attnas.core.errors import DataError

if TYPE_CHECKING:  # torch_geometric (attnas[graph]) is imported by the loaders that make graphs
    from torch_geometric.data import Data

SPLITS = ("train", "val", "test")


@dataclass
class GraphDataset:
    """A node-classification dataset.

    Attributes:
        name: Dataset name.
        num_features: Node feature size.
        num_classes: Number of classes (or labels, when ``multilabel``).
        multilabel: Whether ``y`` is a {0,1} matrix of shape [N, num_classes].
        graph: The single graph of a transductive dataset (with split masks).
        graphs: Per-split lists of graphs of an inductive dataset.
    """

    name: str
    num_features: int
    num_classes: int
    multilabel: bool = False
    graph: Data | None = None
    graphs: dict[str, list[Data]] = field(default_factory=dict)

    @property
    def inductive(self) -> bool:
        """Whether the splits are separate graphs."""
        return self.graph is None

    def summary(self) -> str:
        """One line describing the dataset."""
        if self.graph is not None:
            g = self.graph
            sizes = "/".join(str(int(g[f"{s}_mask"].sum())) for s in SPLITS)
            return (f"{self.name}: {g.num_nodes} nodes, {g.num_edges} edges, {self.num_features} features, "
                    f"{self.num_classes} classes, train/val/test nodes {sizes}")
        counts = "/".join(str(len(self.graphs.get(s, []))) for s in SPLITS)
        return f"{self.name}: inductive, train/val/test graphs {counts}, {self.num_features} features, {self.num_classes} labels"


def validate_graph(data: Data, name: str, *, multilabel: bool = False, num_classes: int | None = None,
                   need_masks: bool = True) -> None:
    """Check a graph's tensors, raising :class:`DataError` naming the first problem.

    Args:
        data: The graph.
        name: Dataset name for messages.
        multilabel: Whether ``y`` is an [N, C] {0,1} matrix instead of an [N] class vector.
        num_classes: Expected number of classes/labels, when known.
        need_masks: Whether train/val/test node masks are required (transductive).
    """
    x = getattr(data, "x", None)
    if not isinstance(x, torch.Tensor):
        raise DataError(f"{name}: graph has no node feature tensor 'x'")
    if x.dim() != 2:
        raise DataError(f"{name}: x must have shape [num_nodes, num_features], got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise DataError(f"{name}: x must be a float tensor, got {x.dtype}")
    n = x.size(0)
    if n == 0:
        raise DataError(f"{name}: graph has no nodes")
    if not torch.isfinite(x).all():
        bad = (~torch.isfinite(x)).any(dim=1).nonzero().flatten()
        raise DataError(f"{name}: x has NaN or infinite values in {len(bad)} nodes (first: node {int(bad[0])})")
    ei = getattr(data, "edge_index", None)
    if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2:
        shape = tuple(ei.shape) if isinstance(ei, torch.Tensor) else type(ei).__name__
        raise DataError(f"{name}: edge_index must have shape [2, num_edges], got {shape}")
    if ei.dtype != torch.long:
        raise DataError(f"{name}: edge_index must be int64 (torch.long), got {ei.dtype}")
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        raise DataError(f"{name}: edge_index refers to node {int(ei.max()) if int(ei.max()) >= n else int(ei.min())}, "
                        f"but the graph has {n} nodes (x has {n} rows)")
    y = getattr(data, "y", None)
    if not isinstance(y, torch.Tensor):
        raise DataError(f"{name}: graph has no label tensor 'y'")
    if y.size(0) != n:
        raise DataError(f"{name}: y has {y.size(0)} rows but x has {n} nodes")
    if multilabel:
        if y.dim() != 2:
            raise DataError(f"{name}: multi-label y must have shape [num_nodes, num_labels], got {tuple(y.shape)}")
        if not torch.isin(y.float(), torch.tensor([0.0, 1.0])).all():
            raise DataError(f"{name}: multi-label y must hold only 0 and 1")
        if num_classes is not None and y.size(1) != num_classes:
            raise DataError(f"{name}: y has {y.size(1)} labels, expected {num_classes}")
    else:
        if y.dim() != 1:
            raise DataError(f"{name}: y must have shape [num_nodes] (class ids), got {tuple(y.shape)}")
        if y.is_floating_point():
            raise DataError(f"{name}: y must hold integer class ids, got {y.dtype}")
        lo, hi = int(y.min()), int(y.max())
        if lo < 0 or (num_classes is not None and hi >= num_classes):
            raise DataError(f"{name}: labels out of range: found {lo}..{hi}, expected 0..{(num_classes or hi + 1) - 1}")
    if need_masks:
        for split in SPLITS:
            m = getattr(data, f"{split}_mask", None)
            if not isinstance(m, torch.Tensor):
                raise DataError(f"{name}: graph has no '{split}_mask'")
            if m.dtype != torch.bool or m.dim() != 1 or m.size(0) != n:
                raise DataError(f"{name}: {split}_mask must be a bool tensor of shape [{n}], got "
                                f"{m.dtype} {tuple(m.shape)}")
            if not m.any():
                raise DataError(f"{name}: {split}_mask selects no nodes")
        if (data.train_mask & data.test_mask).any():
            raise DataError(f"{name}: train_mask and test_mask overlap")


def random_split_masks(y: torch.Tensor, *, train_per_class: int | None = None, train_frac: float = 0.6,
                       val: float | int = 0.2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stratified train/val/test node masks (for graphs that come without a split).

    Args:
        y: Class ids [N].
        train_per_class: Training nodes per class (Planetoid style); else ``train_frac``.
        train_frac: Fraction of nodes for training when ``train_per_class`` is None.
        val: Validation nodes: a count, or a fraction of all nodes.
        seed: Seed of the split.

    Returns:
        ``(train_mask, val_mask, test_mask)``.
    """
    g = torch.Generator().manual_seed(seed)
    n = y.size(0)
    train = torch.zeros(n, dtype=torch.bool)
    classes = y.unique()
    for c in classes:
        idx = (y == c).nonzero().flatten()
        idx = idx[torch.randperm(idx.numel(), generator=g)]
        k = train_per_class if train_per_class is not None else max(1, round(train_frac * idx.numel()))
        train[idx[:k]] = True
    rest = (~train).nonzero().flatten()
    rest = rest[torch.randperm(rest.numel(), generator=g)]
    n_val = val if isinstance(val, int) else round(val * n)
    val_mask = torch.zeros(n, dtype=torch.bool)
    val_mask[rest[:n_val]] = True
    test = torch.zeros(n, dtype=torch.bool)
    test[rest[n_val:]] = True
    return train, val_mask, test
