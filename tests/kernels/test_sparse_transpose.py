"""Kernel sparse_transpose (PyTorch): graph products with cached transposes against autograd's."""

import pytest
import torch
from compiled_kernels import kernel_enabled, kernels_off

from attnas.ops import overrides
from attnas.ops.autoattend.graph_context import GraphContext, SparseFeatures, project


@pytest.mark.parametrize("name", ["gcn_adj", "sum_adj", "sym_adj", "cheb_laplacian"])
def test_propagate_equals_the_plain_sparse_product_in_value_and_gradient(name):
    kernel_enabled("sparse_transpose")
    assert overrides.active("graph_propagate")
    g = torch.Generator().manual_seed(0)
    n = 40
    ctx = GraphContext(torch.randint(0, n, (2, 150), generator=g), n, {})
    x = torch.randn(n, 6, generator=g, requires_grad=True)
    m = getattr(ctx, name)
    with kernels_off():
        plain = ctx.propagate(name, x)
    (g_plain,) = torch.autograd.grad(plain.square().sum(), x)
    assert name + "_t" not in ctx.cache  # the readable path keeps no transpose
    cached = ctx.propagate(name, x)
    (g_cached,) = torch.autograd.grad(cached.square().sum(), x)
    assert torch.equal(plain, cached)
    assert torch.equal(g_plain, g_cached)
    # the transpose is built once per graph and kept in the context's cache
    assert torch.equal(ctx.cache[name + "_t"].to_dense(), m.to_dense().t())


def test_project_of_sparse_features_equals_autograds_weight_gradient():
    kernel_enabled("sparse_transpose")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(30, 12, generator=g)
    x = torch.where(torch.rand(x.shape, generator=g) < 0.8, 0.0, x)
    csr = x.to_sparse_csr()
    features = SparseFeatures.from_rows(csr.col_indices(), csr.crow_indices()[:-1], csr.values(), 12)
    weight = torch.randn(5, 12, generator=g, requires_grad=True)
    bias = torch.randn(5, generator=g, requires_grad=True)
    results = []
    for off in (True, False):
        if off:
            with kernels_off():
                out = project(features, weight, bias)
        else:
            out = project(features, weight, bias)
        results.append((out, *torch.autograd.grad(out.square().sum(), (weight, bias))))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
