"""D-VAE's gated sum and the message descriptors."""

from __future__ import annotations

import torch

from attnas.graphvae.aggregation import GatedSum, aggregate, descriptor_features


def test_zero_descriptor_sends_zero_message():
    gs = GatedSum(6, 4)
    assert torch.equal(gs(torch.zeros(3, 6)), torch.zeros(3, 4))


def test_gated_sum_formula():
    torch.manual_seed(0)
    gs = GatedSum(3, 2)
    s = torch.randn(5, 3)
    expected = torch.sigmoid(s @ gs.gate.weight.T + gs.gate.bias) * (s @ gs.mapper.weight.T)
    assert torch.allclose(gs(s), expected, atol=1e-6)


def test_aggregate_is_the_masked_sum():
    w = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    m = torch.arange(2 * 3 * 2, dtype=torch.float32).view(2, 3, 2)
    out = aggregate(w, m)
    assert torch.equal(out[0], m[0, 0] + m[0, 2])
    assert torch.equal(out[1], torch.zeros(2))


def test_descriptor_features():
    x = torch.randn(2, 3, 5)
    assert descriptor_features("operation", x, 8) is x
    vid = descriptor_features("vertex_id", x, 8)
    assert vid.shape == (2, 3, 8)
    assert torch.equal(vid[1], torch.eye(8)[:3])


def test_fused_product_gives_the_same_message():
    torch.manual_seed(0)
    gs = GatedSum(6, 4)
    s = torch.randn(5, 6)
    assert torch.allclose(GatedSum.from_fused(torch.nn.functional.linear(s, *gs.fused())), gs(s), atol=1e-6)
