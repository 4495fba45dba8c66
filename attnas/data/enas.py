"""The ENAS 6-layer architecture dataset that D-VAE and Chatzianastasis et al. (2021) use.

The file is ``$ROOT/enas/final_structures6.txt`` from the public D-VAE repository
(``shared/data/SOURCES.md``, section 4). Each line is a Python literal: a nested list
describing one architecture (entry ``k`` = layer ``k`` has ``k + 1`` integers: an
operation id 0..5, then ``k`` skip-connection flags), a comma and the architecture's
weight-sharing validation accuracy on CIFAR-10.

As D-VAE (Zhang et al., NeurIPS 2019, Sec. 4 and its ``load_ENAS_graphs``), each line is
read as a DAG of ``layers + 2`` vertices in topological order: vertex 0 is the input,
vertex ``k + 1`` is layer ``k``, the last vertex is the output. Layer ``k`` always takes
an edge from vertex ``k`` (the layer just before, or the input) and its ``j``-th flag adds
an edge from vertex ``j``; the last layer feeds the output. Vertex types are 0 = input,
1 = output and ``op + 2`` for layers (8 types). The first 1,000 lines are skipped
(burn-in), which leaves 19,020 architectures; they are shuffled with Python's
``random.Random(0)`` and split 90 % / 10 % into 17,118 training and 1,902 test graphs:
the same permutation D-VAE draws, so the split is D-VAE's.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnas.core.errors import DataError
from attnas.data.root import require_files, resolve_data_root
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.dag_dataset import DagDataset
from attnas.registry import register_dataset

FILE = "final_structures6.txt"
FOLDER = "enas"
#: Vertex-type labels in D-VAE's numbering (0 input, 1 output, op id + 2 for layers).
VOCAB = ("input", "output", "conv3", "sep3", "conv5", "sep5", "avg3", "max3")
NUM_OPS = 6
BURN_IN = 1000


@dataclass
class EnasData:
    """The ENAS dataset split as D-VAE splits it.

    Attributes:
        train: The training DAGs and their weight-sharing accuracies.
        test: The test DAGs and their accuracies.
        rows: Every kept architecture as its nested ENAS list, in file order after burn-in.
        order: ``order[i]`` is the file-order index (after burn-in) of shuffled graph ``i``;
            graphs ``order[:n_train]`` are the training set.
    """

    train: DagDataset
    test: DagDataset
    rows: list[list[list[int]]]
    order: list[int]

    @property
    def all(self) -> DagDataset:
        """Training and test graphs together (training first)."""
        y = torch.cat([self.train.y, self.test.y])
        return DagDataset(DagBatch.cat([self.train.graphs, self.test.graphs]), y, VOCAB)


def parse_line(text: str, lineno: int, path: Path | str = FILE) -> tuple[list[list[int]], float]:
    """Parse one line of the ENAS file.

    Args:
        text: The line.
        lineno: Its 1-based line number, for the error message.
        path: The file, for the error message.

    Returns:
        ``(rows, accuracy)``: the nested layer lists and the weight-sharing accuracy.

    Raises:
        DataError: Naming the file, the line number and what is wrong.
    """
    where = f"{path}, line {lineno}"
    try:
        value = json.loads("[" + text.strip() + "]")
    except ValueError:
        raise DataError(f"{where}: expected '[[op], [op, flag], ...], accuracy', got {text.strip()[:60]!r}") from None
    if len(value) != 2:
        raise DataError(f"{where}: expected '[[op], [op, flag], ...], accuracy', got {text.strip()[:60]!r}")
    rows, acc = value
    if not isinstance(acc, (int, float)) or isinstance(acc, bool):
        raise DataError(f"{where}: the accuracy {acc!r} is not a number")
    if not isinstance(rows, list) or not rows:
        raise DataError(f"{where}: the architecture must be a non-empty list of layers")
    for k, layer in enumerate(rows):
        if not isinstance(layer, list) or len(layer) != k + 1:
            raise DataError(f"{where}: layer {k} must be a list of {k + 1} integers (op id and {k} flags), got {layer!r}")
        if any(not isinstance(v, int) or isinstance(v, bool) for v in layer):
            raise DataError(f"{where}: layer {k} holds a non-integer: {layer!r}")
        if not 0 <= layer[0] < NUM_OPS:
            raise DataError(f"{where}: layer {k} has operation id {layer[0]}, valid ids are 0..{NUM_OPS - 1}")
        if any(f not in (0, 1) for f in layer[1:]):
            raise DataError(f"{where}: layer {k} has a skip flag other than 0/1: {layer!r}")
    return rows, float(acc)


def rows_to_dag(rows: list[list[int]]) -> tuple[np.ndarray, list[int]]:
    """The DAG of one ENAS architecture, as D-VAE's ``decode_ENAS_to_igraph`` reads it.

    Returns:
        ``(adjacency (n+2, n+2) uint8, vertex types)`` for ``n`` layers.
    """
    n = len(rows)
    adj = np.zeros((n + 2, n + 2), dtype=np.uint8)
    types = [0] + [layer[0] + 2 for layer in rows] + [1]
    for k, layer in enumerate(rows):
        adj[k, k + 1] = 1  # always from the previous vertex
        for j, flag in enumerate(layer[1:]):
            if flag:
                adj[j, k + 1] = 1
    adj[n, n + 1] = 1  # the last layer feeds the output
    return adj, types


def dag_to_rows(adj: np.ndarray, types: list[int]) -> list[list[int]]:
    """The nested ENAS list of a valid ENAS DAG (inverse of :func:`rows_to_dag`).

    Raises:
        DataError: If the DAG is not an ENAS architecture (wrong types or a missing chain edge).
    """
    n = len(types) - 2
    if n < 1 or types[0] != 0 or types[-1] != 1 or any(not 2 <= t < 2 + NUM_OPS for t in types[1:-1]):
        raise DataError(f"not an ENAS DAG: vertex types {types}")
    rows = []
    for k in range(n):
        if not adj[k, k + 1]:
            raise DataError(f"not an ENAS DAG: layer {k} lacks the edge from vertex {k}")
        rows.append([int(types[k + 1]) - 2] + [int(adj[j, k + 1]) for j in range(k)])
    return rows


def flat_string(rows: list[list[int]]) -> str:
    """D-VAE's flat ENAS string (op ids and flags, space separated) of ``rows``."""
    return " ".join(str(v) for layer in rows for v in layer)


def read_rows(path: Path, burn_in: int = BURN_IN) -> tuple[list[list[list[int]]], list[float]]:
    """Read and validate every line of the ENAS file after ``burn_in`` lines.

    Raises:
        DataError: For a malformed line (with its line number) or a file with too few lines.
    """
    rows, accs = [], []
    with open(path, encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, start=1):
            if lineno <= burn_in:
                continue
            if not text.strip():
                continue
            r, a = parse_line(text, lineno, path)
            rows.append(r)
            accs.append(a)
    if not rows:
        raise DataError(f"{path}: no architectures after skipping the first {burn_in} lines")
    return rows, accs


@register_dataset("enas6", group="architectures", help="ENAS 6-layer macro architectures with weight-sharing CIFAR-10 accuracy (D-VAE's 19,020 DAGs)")
def load_enas6(
    data_dir: str | Path | None = None, *, burn_in: int = BURN_IN, seed: int = 0, train_fraction: float = 0.9
) -> EnasData:
    """Load the ENAS 6-layer dataset as D-VAE does.

    Args:
        data_dir: The data root (default: ``$ATTNAS_DATA`` or the per-user cache); the file
            is ``<root>/enas/final_structures6.txt``.
        burn_in: Lines skipped at the start of the file (D-VAE: 1,000).
        seed: Seed of the ``random.Random`` shuffle (D-VAE: 0).
        train_fraction: Fraction of graphs in the training split (D-VAE: 0.9).

    Returns:
        The training and test :class:`~attnas.graphvae.dag_dataset.DagDataset` (values =
        weight-sharing accuracy) and the raw rows.

    Raises:
        DataError: When the file is missing or a line is malformed.
    """
    if not 0.0 < train_fraction < 1.0:
        raise DataError(f"enas6: train_fraction must be in (0, 1), got {train_fraction}")
    root = resolve_data_root(data_dir)
    (path,) = require_files(root / FOLDER, [FILE], "enas6")
    rows, accs = read_rows(path, burn_in)
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)  # the same permutation D-VAE applies to its graph list
    graphs = [rows_to_dag(rows[i]) for i in order]
    batch = DagBatch.from_graphs(graphs)
    y = torch.tensor([accs[i] for i in order], dtype=torch.float32)
    n_train = int(len(order) * train_fraction)
    full = DagDataset(batch, y, VOCAB)
    train = full.subset(range(n_train))
    test = full.subset(range(n_train, len(order)))
    return EnasData(train, test, rows, order)
