"""A node-classification graph built from scikit-learn's bundled digits (needs no download).

The 1,797 8x8 digit images become nodes with their 64 pixel values (scaled to [0, 1])
as features; each node is linked to its ``k`` nearest neighbours in pixel space
(symmetrised, :func:`sklearn.neighbors.kneighbors_graph`). The split follows
Planetoid's semi-supervised style: ``train_per_class`` labelled nodes per class, a
validation set, and the rest for testing, drawn with a fixed seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from attnas.registry import register_dataset
from attnas.data.graphs import GraphDataset, random_split_masks, validate_graph


def load_digits_graph(root: Path | None = None, k: int = 10, train_per_class: int = 20, val: int = 300,
                      split_seed: int = 0, **_: object) -> GraphDataset:
    """Build the digits kNN graph.

    Args:
        root: Unused (the data ships with scikit-learn).
        k: Neighbours per node before symmetrisation.
        train_per_class: Labelled training nodes per class.
        val: Validation nodes.
        split_seed: Seed of the split.
    """
    from sklearn.datasets import load_digits
    from sklearn.neighbors import kneighbors_graph

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    adj = kneighbors_graph(X, n_neighbors=k, mode="connectivity", include_self=False).tocoo()
    edge_index = torch.from_numpy(np.vstack([adj.row, adj.col]).astype(np.int64))
    edge_index = to_undirected(edge_index, num_nodes=X.shape[0])
    yt = torch.from_numpy(y.astype(np.int64))
    train, val_mask, test = random_split_masks(yt, train_per_class=train_per_class, val=val, seed=split_seed)
    data = Data(x=torch.from_numpy(X), edge_index=edge_index, y=yt, train_mask=train, val_mask=val_mask,
                test_mask=test)
    validate_graph(data, "digits-graph")
    return GraphDataset(name="digits-graph", num_features=64, num_classes=10, graph=data)


register_dataset("digits-graph", group="graph")(load_digits_graph)
