"""Datasets of labelled DAGs for the graph VAEs, from any space that provides ``to_dag``.

A :class:`DagDataset` is a :class:`~attnas.graphvae.dag_batch.DagBatch` of all graphs, an
optional performance value per graph and the vertex-type vocabulary. The vocabulary
always starts with the input and output vertex types at indices 0 and 1
(:data:`~attnas.graphvae.dag_batch.START_TYPE`, :data:`~attnas.graphvae.dag_batch.END_TYPE`),
as D-VAE's ``START_TYPE``/``END_TYPE``; the operation labels follow.

:func:`DagDataset.from_dags` turns the ``(adjacency, operation labels)`` pairs that
``space.to_dag(arch)`` returns (node counts may differ) into this form: it adds a single
input vertex in front and a single output vertex at the end unless the DAGs already have
them (D-VAE's decoder starts from one input vertex and stops at one output vertex), and
pads every graph to the largest node count.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnas.core.errors import DataError, did_you_mean
from attnas.graphvae.dag_batch import END_TYPE, START_TYPE, DagBatch

#: Labels of the synthetic input and output vertices added by :meth:`DagDataset.from_dags`.
INPUT_LABEL = "input"
OUTPUT_LABEL = "output"


@dataclass
class DagDataset:
    """All graphs of a dataset, their values and the vertex-type vocabulary.

    Attributes:
        graphs: Every graph, padded to the dataset's largest node count.
        y: One value per graph (e.g. an accuracy), or None.
        vocab: ``vocab[t]`` is the label of vertex type ``t``; ``vocab[0]`` is the input
            type and ``vocab[1]`` the output type.
    """

    graphs: DagBatch
    y: Tensor | None
    vocab: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.vocab) < 3:
            raise DataError(f"a DAG vocabulary needs the input, output and at least one operation type; got {self.vocab}")
        if self.y is not None and tuple(self.y.shape) != (len(self.graphs),):
            raise DataError(f"DagDataset.y must have shape ({len(self.graphs)},), got {tuple(self.y.shape)}")
        if len(self.graphs) and int(self.graphs.types.max()) >= len(self.vocab):
            raise DataError(
                f"a graph uses vertex type {int(self.graphs.types.max())} but the vocabulary has "
                f"only {len(self.vocab)} types"
            )

    def __len__(self) -> int:
        return len(self.graphs)

    @property
    def num_types(self) -> int:
        """Number of vertex types (operation labels plus input and output)."""
        return len(self.vocab)

    @property
    def max_nodes(self) -> int:
        """The padded node count."""
        return self.graphs.max_nodes

    def subset(self, idx: Sequence[int] | np.ndarray | Tensor) -> DagDataset:
        """The dataset restricted to the graphs ``idx`` (in that order)."""
        idx_t = torch.as_tensor(np.asarray(idx), dtype=torch.long)
        return DagDataset(self.graphs.index(idx_t), None if self.y is None else self.y[idx_t], self.vocab)

    def batches(
        self, batch_size: int, shuffle: bool = False, generator: torch.Generator | None = None
    ) -> Iterator[tuple[DagBatch, Tensor | None]]:
        """Iterate over ``(graphs, values)`` mini-batches.

        Args:
            batch_size: Graphs per batch (the last batch may be smaller).
            shuffle: Visit graphs in a random order drawn from ``generator``.
            generator: The random generator for the order.
        """
        n = len(self)
        order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            yield self.graphs.index(idx), None if self.y is None else self.y[idx]

    def labels(self, types: Sequence[int]) -> list[str]:
        """Operation labels of a sequence of vertex types."""
        return [self.vocab[int(t)] for t in types]

    # ------------------------------------------------------------------ building

    @staticmethod
    def from_dags(
        dags: Sequence[tuple[np.ndarray, Sequence[str]]],
        y: Sequence[float] | None = None,
        vocab: Sequence[str] | None = None,
        input_label: str | None = None,
        output_label: str | None = None,
        max_nodes: int | None = None,
    ) -> DagDataset:
        """Build a dataset from ``(adjacency, operation labels)`` pairs.

        Args:
            dags: One pair per architecture, as ``space.to_dag(arch)`` returns it: an
                ``(n, n)`` 0/1 adjacency (``adj[u, v] = 1`` for an edge ``u -> v``, nodes in a
                topological order, so only ``u < v``) and ``n`` labels. Node counts may differ.
            y: Optional value per DAG.
            vocab: The vertex-type vocabulary to use (as :attr:`DagDataset.vocab`, input and
                output first); by default the input and output types followed by the sorted
                labels that occur. Give it to encode new DAGs with a trained model's vocabulary.
            input_label: The label of the DAGs' own input vertex. When given, node 0 of every
                DAG must carry it and be its only source; it becomes the input type. When
                None, an input vertex is added in front with an edge to every node that has
                no predecessor.
            output_label: The label of the DAGs' own output vertex (the last node, the only
                sink); when None an output vertex is added at the end with an edge from every
                node that has no successor. D-VAE's decoder wires a generated output vertex
                from exactly the vertices without another successor, so a DAG whose output
                has other predecessors can be encoded but never decoded exactly.
            max_nodes: Pad to this many nodes (default: the largest graph).

        Raises:
            DataError: Naming the DAG and the problem (shape, order, label, source or sink).
        """
        if len(dags) == 0:
            raise DataError("cannot build a DAG dataset from an empty list of DAGs")
        if y is not None and len(y) != len(dags):
            raise DataError(f"got {len(dags)} DAGs but {len(y)} values")
        in_name = INPUT_LABEL if input_label is None else input_label
        out_name = OUTPUT_LABEL if output_label is None else output_label
        if vocab is None:
            ops = sorted({str(lab) for _, labels in dags for lab in labels} - {in_name, out_name})
            vocab = (in_name, out_name, *ops)
        vocab = tuple(str(v) for v in vocab)
        if len(set(vocab)) != len(vocab):
            raise DataError(f"the vocabulary has duplicate labels: {vocab}")
        index = {lab: i for i, lab in enumerate(vocab)}
        graphs = []
        for i, (adj, labels) in enumerate(dags):
            adj = np.asarray(adj)
            labels = [str(lab) for lab in labels]
            n = len(labels)
            if adj.shape != (n, n):
                raise DataError(f"DAG {i}: adjacency has shape {adj.shape} but there are {n} labels")
            if np.any(np.tril(adj != 0)):
                u, v = map(int, np.argwhere(np.tril(adj != 0))[0])
                raise DataError(
                    f"DAG {i}: edge {u} -> {v} goes against the node order; to_dag must number "
                    "nodes in a topological order (every edge from a lower to a higher index)"
                )
            a = (adj != 0).astype(np.uint8)
            if input_label is None:
                a, labels = _add_input(a, labels, in_name)
            else:
                _check_endpoint(i, a, labels, input_label, first=True)
            if output_label is None:
                a, labels = _add_output(a, labels, out_name)
            else:
                _check_endpoint(i, a, labels, output_label, first=False)
            types = []
            for pos, lab in enumerate(labels):
                if lab not in index:
                    raise DataError(
                        f"DAG {i}, node {pos}: label '{lab}' is not in the vocabulary"
                        f"{did_you_mean(lab, vocab)}; vocabulary: {', '.join(vocab)}"
                    )
                t = index[lab]
                inner = 0 < pos < len(labels) - 1
                if inner and t in (START_TYPE, END_TYPE):
                    raise DataError(
                        f"DAG {i}, node {pos}: label '{lab}' marks an input/output vertex but the node is "
                        "neither the first nor the last"
                    )
                types.append(t)
            types[0], types[-1] = START_TYPE, END_TYPE
            graphs.append((a, types))
        batch = DagBatch.from_graphs(graphs, max_nodes=max_nodes)
        y_t = None if y is None else torch.as_tensor(np.asarray(y, dtype=np.float64), dtype=torch.float32)
        return DagDataset(batch, y_t, vocab)

    def to_dags(self, batch: DagBatch | None = None, strip_endpoints: bool = False) -> list[tuple[np.ndarray, list[str]]]:
        """``(adjacency, labels)`` pairs of ``batch`` (default: the whole dataset).

        Args:
            batch: Graphs in this dataset's vocabulary (e.g. decoded ones).
            strip_endpoints: Drop the input and output vertices (those that
                :meth:`from_dags` added) to get back the DAG a space produced.
        """
        batch = self.graphs if batch is None else batch
        out = []
        for adj, types in batch.graphs():
            labels = self.labels(types)
            if strip_endpoints:
                adj, labels = adj[1:-1, 1:-1], labels[1:-1]
            out.append((adj, labels))
        return out


def _add_input(a: np.ndarray, labels: list[str], name: str) -> tuple[np.ndarray, list[str]]:
    n = len(labels)
    out = np.zeros((n + 1, n + 1), dtype=np.uint8)
    out[1:, 1:] = a
    sources = np.nonzero(a.sum(axis=0) == 0)[0]
    out[0, sources + 1] = 1
    return out, [name, *labels]


def _add_output(a: np.ndarray, labels: list[str], name: str) -> tuple[np.ndarray, list[str]]:
    n = len(labels)
    out = np.zeros((n + 1, n + 1), dtype=np.uint8)
    out[:n, :n] = a
    sinks = np.nonzero(a.sum(axis=1) == 0)[0]
    out[sinks, n] = 1
    return out, [*labels, name]


def _check_endpoint(i: int, a: np.ndarray, labels: list[str], label: str, first: bool) -> None:
    pos = 0 if first else len(labels) - 1
    what = "input" if first else "output"
    if not labels or labels[pos] != label:
        raise DataError(
            f"DAG {i}: the {what} vertex must be node {pos} labelled '{label}', found "
            f"'{labels[pos] if labels else None}'"
        )
    deg = a.sum(axis=0) if first else a.sum(axis=1)
    others = [j for j in np.nonzero(deg == 0)[0].tolist() if j != pos]
    if others:
        kind = "source (no predecessor)" if first else "sink (no successor)"
        raise DataError(f"DAG {i}: node {others[0]} is a {kind} besides the {what} vertex {pos}")
