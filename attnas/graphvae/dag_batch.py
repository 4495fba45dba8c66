"""The padded tensor form of a batch of DAGs.

Every graph VAE in :mod:`attnas.graphvae` reads and writes :class:`DagBatch`: ``G`` DAGs
whose nodes are numbered in a topological order, padded to a common node count ``N``.
Node 0 of every graph is its input (start) vertex and node ``n_nodes - 1`` its output
(end) vertex, as in D-VAE (Zhang et al., NeurIPS 2019, Sec. 3). ENAS graphs all have
``N = 8`` nodes and need no padding, which is what makes the per-node-index batching of
the encoders and the decoder exact for them; other spaces' DAGs are padded and masked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnas.core.errors import DataError

#: Vertex type index of the input vertex (D-VAE's ``START_TYPE``).
START_TYPE = 0
#: Vertex type index of the output vertex (D-VAE's ``END_TYPE``).
END_TYPE = 1


@dataclass
class DagBatch:
    """``G`` DAGs in topological order, padded to ``N`` nodes.

    Attributes:
        types: Vertex type of every node; padding positions hold :data:`START_TYPE`.
        adj: ``adj[g, u, v]`` is True when graph ``g`` has the edge ``u -> v``
            (only ``u < v`` can be set: the node order is topological).
        n_nodes: Number of real nodes of every graph.

    Shapes:
        - **types**: ``(G, N)`` int64
        - **adj**: ``(G, N, N)`` bool
        - **n_nodes**: ``(G,)`` int64
    """

    types: Tensor
    adj: Tensor
    n_nodes: Tensor

    def __post_init__(self) -> None:
        if self.types.dim() != 2:
            raise DataError(f"DagBatch.types must have shape (G, N), got {tuple(self.types.shape)}")
        g, n = self.types.shape
        if tuple(self.adj.shape) != (g, n, n):
            raise DataError(f"DagBatch.adj must have shape {(g, n, n)}, got {tuple(self.adj.shape)}")
        if tuple(self.n_nodes.shape) != (g,):
            raise DataError(f"DagBatch.n_nodes must have shape {(g,)}, got {tuple(self.n_nodes.shape)}")

    # ------------------------------------------------------------------ basic access

    def __len__(self) -> int:
        return self.types.shape[0]

    @property
    def max_nodes(self) -> int:
        """The padded node count ``N``."""
        return self.types.shape[1]

    def to(self, device: torch.device | str) -> DagBatch:
        """The same batch on ``device``."""
        return DagBatch(self.types.to(device), self.adj.to(device), self.n_nodes.to(device))

    def index(self, idx: Tensor | np.ndarray | list[int] | slice) -> DagBatch:
        """The sub-batch of the graphs selected by ``idx``."""
        if not isinstance(idx, slice):
            idx = torch.as_tensor(idx, dtype=torch.long, device=self.types.device)
        return DagBatch(self.types[idx], self.adj[idx], self.n_nodes[idx])

    def node_mask(self) -> Tensor:
        """``(G, N)`` bool: True at real (non-padding) nodes."""
        ar = torch.arange(self.max_nodes, device=self.n_nodes.device)
        return ar.unsqueeze(0) < self.n_nodes.unsqueeze(1)

    def pad_to(self, n: int) -> DagBatch:
        """The same graphs padded to ``n >= N`` nodes."""
        g, cur = self.types.shape
        if n < cur:
            raise DataError(f"cannot pad a batch of {cur}-node graphs down to {n} nodes")
        if n == cur:
            return self
        types = torch.full((g, n), START_TYPE, dtype=self.types.dtype, device=self.types.device)
        types[:, :cur] = self.types
        adj = torch.zeros((g, n, n), dtype=torch.bool, device=self.adj.device)
        adj[:, :cur, :cur] = self.adj
        return DagBatch(types, adj, self.n_nodes)

    @staticmethod
    def cat(batches: list[DagBatch]) -> DagBatch:
        """Concatenate batches (padding them to the largest node count)."""
        if not batches:
            raise DataError("cannot concatenate an empty list of DAG batches")
        n = max(b.max_nodes for b in batches)
        padded = [b.pad_to(n) for b in batches]
        return DagBatch(
            torch.cat([b.types for b in padded]),
            torch.cat([b.adj for b in padded]),
            torch.cat([b.n_nodes for b in padded]),
        )

    # ------------------------------------------------------------------ conversions

    def keys(self) -> list[str]:
        """A canonical string per graph: equal strings mean the same labelled DAG.

        Two DAGs are the same when they have the same node count, the same type at every
        index and the same in-neighbour set at every index (D-VAE's ``is_same_DAG``; node
        order is part of the identity, as in D-VAE).
        """
        types = self.types.cpu().numpy()
        adj = self.adj.cpu().numpy()
        n_nodes = self.n_nodes.cpu().numpy()
        out = []
        for t, a, n in zip(types, adj, n_nodes):
            n = int(n)
            src, dst = np.nonzero(a[:n, :n])
            edges = ",".join(f"{u}>{v}" for u, v in sorted(zip(src.tolist(), dst.tolist()), key=lambda e: (e[1], e[0])))
            out.append(f"{n}|{'.'.join(map(str, t[:n].tolist()))}|{edges}")
        return out

    def graphs(self) -> list[tuple[np.ndarray, list[int]]]:
        """Every graph as ``(adjacency (n, n) uint8, type indices)`` without padding."""
        types = self.types.cpu().numpy()
        adj = self.adj.cpu().numpy()
        return [
            (adj[i, :n, :n].astype(np.uint8), types[i, :n].tolist())
            for i, n in enumerate(self.n_nodes.cpu().tolist())
        ]

    @staticmethod
    def from_graphs(graphs: list[tuple[np.ndarray, list[int]]], max_nodes: int | None = None) -> DagBatch:
        """Pad ``(adjacency, type indices)`` pairs into a batch.

        Args:
            graphs: One ``(adjacency (n, n), types (n,))`` pair per graph; the adjacency must
                be upper triangular (a topological node order).
            max_nodes: Pad to this many nodes (default: the largest graph).

        Raises:
            DataError: For an empty list, a shape mismatch or an edge against the order.
        """
        if not graphs:
            raise DataError("cannot build a DAG batch from an empty list of graphs")
        sizes = [len(t) for _, t in graphs]
        n = max(sizes) if max_nodes is None else max_nodes
        if max(sizes) > n:
            raise DataError(f"a graph has {max(sizes)} nodes, more than max_nodes={n}")
        g = len(graphs)
        types = np.full((g, n), START_TYPE, dtype=np.int64)
        adj = np.zeros((g, n, n), dtype=bool)
        for i, (a, t) in enumerate(graphs):
            a = np.asarray(a)
            k = len(t)
            if a.shape != (k, k):
                raise DataError(f"graph {i}: adjacency has shape {a.shape} but there are {k} node types")
            types[i, :k] = t
            adj[i, :k, :k] = a != 0
        lower = np.tril(np.ones((n, n), dtype=bool))
        bad = np.argwhere(adj & lower)
        if len(bad):
            i, u, v = map(int, bad[0])
            raise DataError(
                f"graph {i}: edge {u} -> {v} goes against the node order; nodes must be numbered "
                "in a topological order (every edge from a lower to a higher index)"
            )
        types, adj = torch.from_numpy(types), torch.from_numpy(adj)
        return DagBatch(types, adj, torch.as_tensor(sizes, dtype=torch.long))
