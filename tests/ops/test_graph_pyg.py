"""The Cora/PPI pool: each cached-propagation operation equals its torch_geometric layer."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnas import _registry
from attnas.ops.graph_context import GraphContext


def graph(n=25, e=80, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    return torch.randn(n, 16, generator=g), ei


def op(name):
    return _registry.get("op", name, group="pyg")(16, act="linear")


def test_gcn_equals_pyg_gcnconv():
    x, ei = graph()
    o = op("gcn")
    ref = o.conv.__class__(16, 16)
    ref.load_state_dict(o.conv.state_dict())
    assert torch.allclose(o(x, GraphContext(ei, x.size(0))), ref(x, ei), atol=1e-5)


def test_sg_equals_pyg_sgconv():
    x, ei = graph()
    o = op("sg")
    assert torch.allclose(o(x, GraphContext(ei, x.size(0))), o.conv(x, ei), atol=1e-5)


def test_cheb_equals_pyg_chebconv():
    x, ei = graph()
    o = op("cheb")
    assert torch.allclose(o(x, GraphContext(ei, x.size(0))), o.conv(x, ei), atol=1e-5)


def test_arma_equals_pyg_armaconv():
    x, ei = graph()
    o = op("arma")
    assert torch.allclose(o(x, GraphContext(ei, x.size(0))), o.conv(x, ei), atol=1e-5)


@pytest.mark.parametrize("name", ["gat_1", "gat_2", "gat_4", "gat_8", "gat_16"])
def test_gat_heads_and_shapes(name):
    x, ei = graph()
    o = op(name).eval()
    heads = int(name.split("_")[1])
    assert o.conv.heads == heads
    assert o(x, GraphContext(ei, x.size(0))).shape == (25, 16)


def test_every_pool_op_maps_hidden_to_hidden_and_uses_the_graph():
    x, ei = graph()
    ctx = GraphContext(ei, x.size(0))
    for name in _registry.names("op", "pyg"):
        o = op(name).eval()
        out = o(x, ctx)
        assert out.shape == x.shape, name
        if name in ("zero",):
            assert not out.any()
        if name == "identity":
            assert torch.equal(out, x)
        if name not in ("zero", "identity", "linear"):
            # removing every edge changes the output of a graph operation
            lonely = GraphContext(torch.empty(2, 0, dtype=torch.long), x.size(0))
            assert not torch.allclose(out, o(x, lonely)), name


def test_cache_is_computed_once_per_graph():
    x, ei = graph()
    cache = {}
    o = op("gcn")
    o(x, GraphContext(ei, x.size(0), cache))
    first = cache["gcn_adj"]
    o(x, GraphContext(ei, x.size(0), cache))
    assert cache["gcn_adj"] is first
    assert isinstance(o, nn.Module)
