"""GraphContext: cached propagation matrices and their product with cached transposes."""

import pytest
import torch

from attnas.ops.autoattend.graph_context import GraphContext


@pytest.mark.parametrize("name", ["gcn_adj", "sum_adj", "sym_adj", "cheb_laplacian"])
def test_propagate_equals_the_plain_sparse_product_in_value_and_gradient(name):
    g = torch.Generator().manual_seed(0)
    n = 40
    ctx = GraphContext(torch.randint(0, n, (2, 150), generator=g), n, {})
    x = torch.randn(n, 6, generator=g, requires_grad=True)
    m = getattr(ctx, name)
    plain = m @ x
    (g_plain,) = torch.autograd.grad(plain.square().sum(), x)
    cached = ctx.propagate(name, x)
    (g_cached,) = torch.autograd.grad(cached.square().sum(), x)
    assert torch.equal(plain, cached)
    assert torch.equal(g_plain, g_cached)
    # the transpose is built once per graph and kept in the context's cache
    assert torch.equal(ctx.cache[name + "_t"].to_dense(), m.to_dense().t())


def test_propagate_without_gradient_builds_no_transpose():
    ctx = GraphContext(torch.tensor([[0, 1], [1, 2]]), 3, {})
    out = ctx.propagate("gcn_adj", torch.ones(3, 2))
    assert out.shape == (3, 2) and "gcn_adj_t" not in ctx.cache
