"""GraphContext: cached propagation matrices and their products."""

import pytest
import torch

from attnas.ops import overrides
from attnas.ops.autoattend.graph_context import GraphContext


@pytest.mark.parametrize("name", ["gcn_adj", "sum_adj", "sym_adj", "cheb_laplacian"])
def test_propagate_is_the_sparse_product_and_the_matrix_is_cached(name):
    g = torch.Generator().manual_seed(0)
    n = 40
    ctx = GraphContext(torch.randint(0, n, (2, 150), generator=g), n, {})
    x = torch.randn(n, 6, generator=g)
    with overrides.eager_only():
        assert torch.equal(ctx.propagate(name, x), getattr(ctx, name) @ x)
    assert getattr(ctx, name) is ctx.cache[name]


def test_propagate_without_gradient_builds_no_transpose():
    ctx = GraphContext(torch.tensor([[0, 1], [1, 2]]), 3, {})
    out = ctx.propagate("gcn_adj", torch.ones(3, 2))
    assert out.shape == (3, 2) and "gcn_adj_t" not in ctx.cache
