"""The heterophily pool: each operation equals its torch_geometric layer or its paper's equation."""

from __future__ import annotations

import torch
from torch_geometric.utils import remove_self_loops, to_dense_adj, to_undirected

from attnas import registry
from attnas.ops.autoattend.graph_context import GraphContext
from attnas.ops.autoattend.graph_heterophily import POOL, FAGCNOp, GPROp
from attnas.ops.autoattend.graph_pyg import GATOp


def graph(n=30, f=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = remove_self_loops(to_undirected(torch.randint(0, n, (2, 80), generator=g), num_nodes=n))[0]
    return torch.randn(n, f, generator=g), ei, GraphContext(ei, n, {})


def test_fagcn_is_faconv_on_a_linear_map():
    torch.manual_seed(0)
    x, ei, ctx = graph()
    op = FAGCNOp(12, 8, "linear", 0.0).eval()
    with torch.no_grad():
        op.conv.att_l.weight.normal_()  # coefficients of both signs
        z = op.lin(x)
        assert torch.allclose(op(x, ctx), op.conv(z, z, ei), atol=1e-6)
        alpha = torch.tanh(op.conv.att_l(z)[ei[0]] + op.conv.att_r(z)[ei[1]])
    assert (alpha < 0).any() and (alpha > 0).any()


def test_gat_sep_is_gatconv_without_self_loops_plus_a_separate_ego_weight():
    torch.manual_seed(0)
    x, ei, ctx = graph()
    for heads, out in ((8, 16), (1, 5)):
        op = GATOp(12, out, heads, "linear", 0.0, separate=True).eval()
        ref = op.conv
        assert not ref.add_self_loops and ref.res is not None
        with torch.no_grad():
            assert torch.allclose(op(x, ctx), ref(x, ei), atol=1e-6)


def test_gpr_is_the_generalized_pagerank_sum_with_signed_weights():
    torch.manual_seed(0)
    x, ei, ctx = graph()
    op = GPROp(12, 6, "linear", K=4, alpha=0.1).eval()
    with torch.no_grad():
        op.prop.gamma.copy_(torch.tensor([0.5, -1.0, 0.3, -0.2, 0.1]))
        a = to_dense_adj(ei, max_num_nodes=30)[0] + torch.eye(30)
        d = a.sum(1).rsqrt()
        a_norm = d[:, None] * a * d[None, :]
        h = op.lin(x)
        ref = sum(g * torch.linalg.matrix_power(a_norm, k) @ h for k, g in enumerate(op.prop.gamma))
        assert torch.allclose(op(x, ctx), ref, atol=1e-5)


def test_gpr_starts_as_personalized_pagerank():
    gamma = GPROp(4, 4, "linear", K=10, alpha=0.1).prop.gamma.detach()
    assert torch.allclose(gamma[:10], 0.1 * 0.9 ** torch.arange(10.0)) and torch.isclose(gamma[10], torch.tensor(0.9 ** 10))
    assert torch.isclose(gamma.sum(), torch.tensor(1.0))


def test_every_operation_of_the_pool_runs_and_trains():
    x, ei, ctx = graph()
    names = registry.names("op", POOL)
    assert {"fagcn", "gpr", "gat_sep_1", "gat_sep_8", "linear", "gcn", "gat_8", "sage"} <= set(names)
    for name in set(names) - {"zero", "identity"}:
        op = registry.get("op", name, group=POOL)(12, 16, act="elu", attn_dropout=0.5)
        out = op(x, ctx)
        assert out.shape == (30, 16), name
        out.sum().backward()
        assert all(p.grad is not None for p in op.parameters()), name
