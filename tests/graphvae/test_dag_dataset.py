"""DagDataset from any space's to_dag output: endpoints, vocabulary, padding, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnas.core.errors import DataError
from attnas.graphvae.dag_dataset import DagDataset

# two DAGs of different sizes, as a space's to_dag would give them
D1 = (np.array([[0, 1, 1], [0, 0, 0], [0, 0, 0]]), ["gcn", "gat", "sage"])  # one source, two sinks
D2 = (np.array([[0, 0], [0, 0]]), ["gat", "gat"])  # two sources and sinks


def test_adds_input_and_output_vertices():
    ds = DagDataset.from_dags([D1, D2], y=[0.5, 0.7])
    assert ds.vocab == ("input", "output", "gat", "gcn", "sage")
    assert ds.max_nodes == 5 and ds.graphs.n_nodes.tolist() == [5, 4]
    adj, labels = ds.to_dags()[0]
    assert labels == ["input", "gcn", "gat", "sage", "output"]
    assert adj.tolist() == [
        [0, 1, 0, 0, 0],  # the input feeds the only source
        [0, 0, 1, 1, 0],
        [0, 0, 0, 0, 1],  # both sinks feed the output
        [0, 0, 0, 0, 1],
        [0, 0, 0, 0, 0],
    ]
    adj2, labels2 = ds.to_dags(strip_endpoints=True)[1]
    assert labels2 == ["gat", "gat"] and not adj2.any()
    assert torch.allclose(ds.y, torch.tensor([0.5, 0.7]))


def test_own_endpoints_and_given_vocabulary():
    adj = np.array([[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]])
    ds = DagDataset.from_dags([(adj, ["in", "x", "y", "out"])], input_label="in", output_label="out")
    assert ds.vocab == ("in", "out", "x", "y") and ds.graphs.types[0].tolist() == [0, 2, 3, 1]
    again = DagDataset.from_dags([(adj, ["in", "y", "y", "out"])], vocab=ds.vocab, input_label="in", output_label="out")
    assert again.graphs.types[0].tolist() == [0, 3, 3, 1]


def test_errors_name_the_dag_and_problem():
    with pytest.raises(DataError, match="DAG 1, node 1: label 'gatt' is not in the vocabulary \\(did you mean 'gat'\\?\\)"):
        DagDataset.from_dags([D1, (D2[0], ["gatt", "gat"])], vocab=("input", "output", "gat", "gcn", "sage"))
    with pytest.raises(DataError, match="DAG 0: edge 1 -> 0"):
        DagDataset.from_dags([(np.array([[0, 0], [1, 0]]), ["a", "b"])])
    with pytest.raises(DataError, match="DAG 0: adjacency has shape"):
        DagDataset.from_dags([(np.zeros((3, 3)), ["a", "b"])])
    adj = np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]])
    with pytest.raises(DataError, match="node 2 is a source"):
        DagDataset.from_dags([(adj, ["in", "x", "out"])], input_label="in")
    with pytest.raises(DataError, match="empty"):
        DagDataset.from_dags([])


def test_batches_cover_everything_once():
    ds = DagDataset.from_dags([D1, D2, D1, D2, D1], y=[1, 2, 3, 4, 5])
    seen = []
    for batch, y in ds.batches(2, shuffle=True, generator=torch.Generator().manual_seed(0)):
        assert len(batch) == len(y) <= 2
        seen += y.tolist()
    assert sorted(seen) == [1, 2, 3, 4, 5]
    sub = ds.subset([4, 0])
    assert sub.y.tolist() == [5.0, 1.0] and len(sub) == 2
