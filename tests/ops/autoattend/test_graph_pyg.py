"""The Cora/PPI pool: each cached-propagation operation equals its torch_geometric layer."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnas import registry
from attnas.ops.autoattend.graph_context import GraphContext, SparseFeatures


def graph(n=25, e=80, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    return torch.randn(n, 16, generator=g), ei


def op(name):
    return registry.get("op", name, group="pyg")(16, act="linear")


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
    for name in registry.names("op", "pyg"):
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


def sparse(x):
    return x.to_sparse_csr()


def test_sage_equals_pyg_sageconv():
    x, ei = graph()
    o = op("sage")
    assert torch.allclose(o(x, GraphContext(ei, x.size(0))), o.conv(x, ei), atol=1e-5)


@pytest.mark.parametrize("name", ["gat_1", "gat_2", "gat_8"])
def test_gat_equals_pyg_gatconv(name):
    x, ei = graph()
    o = op(name).eval()
    ctx = GraphContext(ei, x.size(0))
    assert torch.allclose(o(x, ctx), o.conv(x, ctx.edge_index_with_self_loops), atol=1e-5)


WIDTH_CHANGING = ["gcn", "sage", "gat_1", "gat_4", "gat_16", "linear", "arma", "cheb", "sg"]


@pytest.mark.parametrize("name", WIDTH_CHANGING)
def test_ops_map_a_sparse_input_width_to_another_like_the_dense_input(name):
    """Layer-1 operations read raw (sparse) features of another width; same values and gradients."""
    x, ei = graph()
    x = torch.where(torch.rand(x.shape, generator=torch.Generator().manual_seed(1)) < 0.8, 0.0, x)
    x = torch.cat([x, x], 1)  # 32 input columns
    o = registry.get("op", name, group="pyg")(32, 7, act="elu").eval()
    ctx = GraphContext(ei, x.size(0))
    dense = o(x, ctx)
    assert dense.shape == (25, 7)
    params = list(o.parameters())
    grads = torch.autograd.grad(dense.square().sum(), params, allow_unused=True)  # ARMA's layer weight: unused
    csr = sparse(x)
    features = SparseFeatures.from_rows(csr.col_indices(), csr.crow_indices()[:-1], csr.values(), 32)
    assert torch.equal(features.rows_t.to_dense(), x.t())
    for given in (csr, features):
        sp = o(given, ctx)
        assert torch.allclose(sp, dense, atol=1e-5)
        for g_sparse, g_dense in zip(torch.autograd.grad(sp.square().sum(), params, allow_unused=True), grads):
            assert (g_sparse is None) == (g_dense is None)
            if g_dense is not None:
                assert torch.allclose(g_sparse, g_dense, atol=1e-4)


def test_width_changing_ops_equal_their_pyg_layers():
    x, ei = graph()
    ctx = GraphContext(ei, x.size(0))
    for name in ("gcn", "sage", "cheb", "arma", "sg"):
        o = registry.get("op", name, group="pyg")(16, 5, act="linear")
        ref = o.conv(x, ei)
        if name == "gcn":
            ref = o.conv.__class__(16, 5)
            ref.load_state_dict(o.conv.state_dict())
            ref = ref(x, ei)
        assert torch.allclose(o(x, ctx), ref, atol=1e-5), name
    for heads in (1, 2):  # 5 outputs: 1 head concatenated, 2 heads averaged
        o = registry.get("op", f"gat_{heads}", group="pyg")(16, 5, act="linear").eval()
        assert o.conv.concat == (heads == 1)
        assert torch.allclose(o(x, ctx), o.conv(x, ctx.edge_index_with_self_loops), atol=1e-5)
