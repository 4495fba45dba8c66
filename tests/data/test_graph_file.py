"""A user's own graph file: validated with clear errors."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

from attnas.core.errors import DataError
from attnas.data.graph_file import load_graph_file


def good(n=30):
    g = torch.Generator().manual_seed(0)
    return Data(x=torch.rand(n, 4, generator=g), edge_index=torch.randint(0, n, (2, 60), generator=g),
                y=torch.arange(n) % 3)


def save(tmp_path, data, name="g.pt"):
    p = tmp_path / name
    torch.save(data, p)
    return str(p)


def test_loads_and_draws_a_split_when_none_given(tmp_path):
    with pytest.warns(UserWarning, match="drawing a stratified 60/20/20 split"):
        ds = load_graph_file(tmp_path, save(tmp_path, good()))
    g = ds.graph
    assert ds.num_classes == 3 and int(g.train_mask.sum() + g.val_mask.sum() + g.test_mask.sum()) == 30
    assert not (g.train_mask & g.test_mask).any()


def test_dict_of_tensors_with_masks(tmp_path):
    d = good()
    m = torch.zeros(30, dtype=torch.bool)
    tr, va, te = m.clone(), m.clone(), m.clone()
    tr[:10], va[10:20], te[20:] = True, True, True
    p = save(tmp_path, {"x": d.x, "edge_index": d.edge_index, "y": d.y, "train_mask": tr, "val_mask": va,
                        "test_mask": te})
    assert int(load_graph_file(tmp_path, p).graph.test_mask.sum()) == 10


@pytest.mark.parametrize("change,message", [
    (lambda d: setattr(d, "y", torch.arange(29)), "y has 29 rows but x has 30 nodes"),
    (lambda d: setattr(d, "y", torch.arange(30) - 1), "labels out of range"),
    (lambda d: d.x.__setitem__((3, 1), float("nan")), "NaN or infinite values in 1 nodes (first: node 3)"),
    (lambda d: setattr(d, "edge_index", torch.tensor([[0, 31], [1, 2]])), "refers to node 31"),
    (lambda d: setattr(d, "edge_index", torch.zeros(3, 5, dtype=torch.long)), "edge_index must have shape [2, num_edges]"),
    (lambda d: setattr(d, "x", torch.ones(30)), "x must have shape [num_nodes, num_features]"),
    (lambda d: setattr(d, "y", torch.rand(30)), "must hold integer class ids"),
])
def test_bad_graphs_name_the_problem(tmp_path, change, message):
    d = good()
    change(d)
    with pytest.raises(DataError) as err:
        load_graph_file(tmp_path, save(tmp_path, d))
    assert message in str(err.value)


def test_not_a_graph_and_missing_file(tmp_path):
    p = tmp_path / "junk.pt"
    p.write_bytes(b"junk")
    with pytest.raises(DataError, match="is not a graph saved with torch.save"):
        load_graph_file(tmp_path, str(p))
    with pytest.raises(DataError, match="does not exist"):
        load_graph_file(tmp_path, str(tmp_path / "nope.pt"))
    with pytest.raises(DataError, match="set task.path"):
        load_graph_file(tmp_path, "")
