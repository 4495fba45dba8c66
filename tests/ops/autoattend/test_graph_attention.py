"""Eq. 8 on graph edges: equal to the dense masked form, and linear in the number of edges."""

from __future__ import annotations

import math

import torch

from attnas.ops.autoattend.graph_attention import EdgeScaledDotProductAttention
from attnas.ops.autoattend.graph_context import GraphContext


def dense_masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, adj: torch.Tensor,
                           heads: int) -> torch.Tensor:
    """Reference: Eq. 8 with the N x N energy masked to ``-inf`` outside ``adj``.

    Args:
        q, k, v: [N, d] representations.
        adj: [N, N] bool, ``adj[v, u]`` True when u is attended by v.
        heads: Number of heads.
    """
    n, d = q.shape
    qh, kh, vh = (t.view(n, heads, d // heads).transpose(0, 1) for t in (q, k, v))
    energy = qh @ kh.transpose(1, 2) / math.sqrt(d / heads)
    energy = energy.masked_fill(~adj.unsqueeze(0), float("-inf"))
    return (torch.softmax(energy, -1) @ vh).transpose(0, 1).reshape(n, d)


def _random_graph(seed: int, n: int, d: int, edges: int):
    """Random q, k, v ``[n, d]``, a graph without self-loops, its context and its dense
    attention mask (self-loops added; ``adj[v, u]``: target v attends to source u)."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, edges), generator=g)
    ei = torch.unique(ei[:, ei[0] != ei[1]], dim=1)
    q, k, v = (torch.randn(n, d, generator=g) for _ in range(3))
    adj = torch.eye(n, dtype=torch.bool)
    adj[ei[1], ei[0]] = True
    return q, k, v, GraphContext(ei, n), adj


def test_edge_attention_equals_dense_masked_attention():
    h = 4
    q, k, v, ctx, adj = _random_graph(0, 40, 32, 150)
    out = EdgeScaledDotProductAttention(heads=h).eval()(q, k, v, ctx)
    assert torch.allclose(out, dense_masked_attention(q, k, v, adj, h), atol=1e-5)


def test_isolated_node_attends_to_itself():
    q = k = torch.randn(3, 8)
    v = torch.randn(3, 8)
    out = EdgeScaledDotProductAttention(heads=2)(q, k, v, GraphContext(torch.tensor([[0], [1]]), 3))
    assert torch.allclose(out[2], v[2])


def test_large_sparse_graph_runs_without_an_n_squared_matrix():
    """200,000 nodes: a dense N x N energy (4 heads) would need 640 GB; edge-wise needs ~ E x d."""
    n, e, d = 200_000, 400_000, 16
    g = torch.Generator().manual_seed(1)
    ei = torch.randint(0, n, (2, e), generator=g)
    q = torch.randn(n, d, generator=g)
    out = EdgeScaledDotProductAttention(heads=4).eval()(q, q, q, GraphContext(ei, n))
    assert out.shape == (n, d) and torch.isfinite(out).all()


def test_qk_norm_attends_where_tiny_queries_and_keys_would_average():
    n, d, h = 30, 16, 4
    q, k, v, ctx, adj = _random_graph(1, n, d, 120)
    plain = EdgeScaledDotProductAttention(heads=h).eval()
    normed = EdgeScaledDotProductAttention(heads=h, qk_norm=True).eval()
    # the plain layer with queries and keys scaled down to 1e-4 is the neighbourhood mean of v
    mean = (adj.float() @ v) / adj.sum(1, keepdim=True)
    assert torch.allclose(plain(q * 1e-4, k * 1e-4, v, ctx), mean, atol=1e-5)
    # with qk_norm the scale of q and k does not matter, and the result is Eq. 8 on the
    # per-head unit-RMS queries and keys, not the mean
    tiny = normed(q * 1e-4, k * 1e-4, v, ctx)
    assert torch.allclose(tiny, normed(q, k, v, ctx), atol=1e-3)
    unit = [x.view(n, h, d // h) / x.view(n, h, d // h).pow(2).mean(-1, keepdim=True).sqrt() for x in (q, k)]
    assert torch.allclose(tiny, dense_masked_attention(unit[0].reshape(n, d), unit[1].reshape(n, d), v, adj, h),
                          atol=1e-3)
    assert not torch.allclose(tiny, mean, atol=1e-2)
