"""The digits k-NN graph: the data that needs no download."""

from __future__ import annotations

import torch

from attnas.data.digits_graph import load_digits_graph


def test_digits_graph():
    ds = load_digits_graph(k=5)
    g = ds.graph
    assert g.num_nodes == 1797 and ds.num_features == 64 and ds.num_classes == 10
    assert int(g.train_mask.sum()) == 200 and int(g.val_mask.sum()) == 300
    assert int(g.test_mask.sum()) == 1797 - 500
    # symmetric, and at least k neighbours each
    a = torch.zeros(1797, 1797, dtype=torch.bool)
    a[g.edge_index[0], g.edge_index[1]] = True
    assert torch.equal(a, a.t())
    assert (a.sum(1) >= 5).all()
    # neighbours mostly share the label (the graph is informative)
    same = (g.y[g.edge_index[0]] == g.y[g.edge_index[1]]).float().mean()
    assert same > 0.9
    # the split is reproducible
    assert torch.equal(load_digits_graph(k=5).graph.train_mask, g.train_mask)
