"""The graph stem: sparse bag-of-words features give the dense projection exactly."""

import torch

from attnas.spaces.autoattend_graph import GraphStem
from attnas.tasks.node_classification import NodeBatch


def _batch(x: torch.Tensor) -> NodeBatch:
    edges = torch.tensor([[0, 1, 2], [1, 2, 0]])
    return NodeBatch(x, edges, torch.zeros(x.size(0), dtype=torch.long), None)


def test_sparse_features_project_like_dense_ones_with_the_same_gradients():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(7, 30, generator=g) * (torch.rand(7, 30, generator=g) < 0.1)
    x[3] = 0.0  # a node without any feature
    batch = _batch(x)
    assert batch.sparse_x is not None  # under 20% non-zero: the sparse path is taken
    stem = GraphStem(30, 5, dropout=0.5).eval()
    h_sparse, _ = stem(batch)
    h_sparse.square().sum().backward()
    grad_sparse = stem.proj.weight.grad.clone()
    stem.zero_grad()
    h_dense = stem.proj(x)
    h_dense.square().sum().backward()
    assert torch.allclose(h_sparse, h_dense, atol=1e-6)
    assert torch.allclose(grad_sparse, stem.proj.weight.grad, atol=1e-6)
    assert torch.allclose(h_sparse[3], stem.proj.bias)


def test_input_dropout_acts_on_the_non_zero_values_only():
    x = torch.zeros(4, 50)
    x[:, :5] = 1.0
    stem = GraphStem(50, 3, dropout=0.5).train()
    with torch.no_grad():
        stem.proj.weight.fill_(1.0)
        stem.proj.bias.zero_()
    torch.manual_seed(1)
    h, _ = stem(_batch(x))
    # each row sums its 5 kept-and-rescaled ones: a multiple of 2 between 0 and 10
    assert torch.all((h % 2 == 0) & (h >= 0) & (h <= 10))
    assert h.min() < 10  # 20 Bernoulli(0.5) draws: something was dropped
