"""DagBatch: construction checks, padding, keys and conversions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnas.core.errors import DataError
from attnas.graphvae.dag_batch import DagBatch

A3 = np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]])
A4 = np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]])


def test_from_graphs_pads_and_masks():
    b = DagBatch.from_graphs([(A3, [0, 2, 1]), (A4, [0, 3, 2, 1])])
    assert b.max_nodes == 4 and b.n_nodes.tolist() == [3, 4]
    assert b.node_mask().tolist() == [[True, True, True, False], [True, True, True, True]]
    assert b.types[0].tolist() == [0, 2, 1, 0]
    back = b.graphs()
    assert np.array_equal(back[0][0], A3) and back[1][1] == [0, 3, 2, 1]


def test_edges_against_the_order_are_rejected():
    bad = A3.copy()
    bad[2, 0] = 1
    with pytest.raises(DataError, match="edge 2 -> 0 goes against the node order"):
        DagBatch.from_graphs([(A3, [0, 2, 1]), (bad, [0, 2, 1])])
    with pytest.raises(DataError, match="3 node types"):
        DagBatch.from_graphs([(A4, [0, 2, 1])])
    with pytest.raises(DataError, match="more than max_nodes=3"):
        DagBatch.from_graphs([(A4, [0, 2, 2, 1])], max_nodes=3)


def test_shape_checks():
    with pytest.raises(DataError, match="adj must have shape"):
        DagBatch(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, 4, dtype=torch.bool), torch.tensor([3, 3]))


def test_keys_identify_labelled_dags():
    b = DagBatch.from_graphs([(A3, [0, 2, 1]), (A3, [0, 3, 1]), (A3, [0, 2, 1])])
    k = b.keys()
    assert k[0] == k[2] and k[0] != k[1]
    assert DagBatch.cat([b.index([0]), b.index([0]).pad_to(6)]).keys()[1] == k[0]


def test_cat_and_index():
    a = DagBatch.from_graphs([(A3, [0, 2, 1])])
    b = DagBatch.from_graphs([(A4, [0, 3, 2, 1])])
    c = DagBatch.cat([a, b])
    assert c.max_nodes == 4 and c.index([1]).keys() == b.keys()
    with pytest.raises(DataError, match="pad"):
        b.pad_to(3)
