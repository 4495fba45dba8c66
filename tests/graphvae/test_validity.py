"""D-VAE's validity tests on hand-made DAGs."""

from __future__ import annotations

import numpy as np
import torch

from attnas.data.enas import rows_to_dag
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.validity import is_valid_dag, is_valid_enas


def _batch(*graphs):
    return DagBatch.from_graphs([(np.array(a), t) for a, t in graphs], max_nodes=8)


CHAIN = ([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]], [0, 2, 3, 1])


def test_valid_and_invalid_dags():
    no_pred = ([[0, 0, 1], [0, 0, 1], [0, 0, 0]], [0, 2, 1])  # vertex 1 has no predecessor
    no_succ = ([[0, 1, 1], [0, 0, 0], [0, 0, 0]], [0, 2, 1])  # vertex 1 has no successor
    two_inputs = ([[0, 1, 0], [0, 0, 1], [0, 0, 0]], [0, 0, 1])
    no_output = ([[0, 1, 0], [0, 0, 1], [0, 0, 0]], [0, 2, 3])
    got = is_valid_dag(_batch(CHAIN, no_pred, no_succ, two_inputs, no_output)).tolist()
    assert got == [True, False, False, False, False]


def test_enas_validity():
    enas = rows_to_dag([[1], [4, 0], [5, 0, 1]])
    skip_to_output = np.array(enas[0])
    skip_to_output[1, 4] = 1  # the output may only take the last layer ...
    skip_to_output[3, 4] = 1
    broken_chain = ([[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]], [0, 2, 3, 1])  # no 1 -> 2
    batch = _batch(enas, (skip_to_output, enas[1]), broken_chain, CHAIN)
    assert is_valid_dag(batch).tolist() == [True, True, True, True]
    assert is_valid_enas(batch).tolist() == [True, False, False, True]
    assert is_valid_enas(batch, n_nodes=5).tolist() == [True, False, False, False]


def test_all_real_enas_graphs_are_valid():
    rows = [[[k % 6] + [(k + j) % 2 for j in range(i)] for i, k in enumerate(range(s, s + 6))] for s in range(20)]
    batch = DagBatch.from_graphs([rows_to_dag(r) for r in rows])
    assert torch.all(is_valid_enas(batch, n_nodes=8))
