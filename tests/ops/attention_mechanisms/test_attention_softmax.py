"""Softmax block equals a naive masked scaled dot-product reference."""

import torch

from attnas.ops.attention_mechanisms import build_mechanism
from attention_reference import reference  # noqa: F401  (the fixture)


def test_softmax_block_equals_naive_reference(reference):
    torch.manual_seed(0)
    block = build_mechanism("softmax", 16, heads=4)
    x, mask = reference.padded_inputs(dim=16)
    q, k, v = reference.block_qkv(block, x)
    allowed = mask[:, None, None, :].expand(-1, 1, x.shape[1], -1)
    expected = reference.finish(block, reference.dense_attention(q, k, v, allowed), mask)
    torch.testing.assert_close(block(x, mask), expected, atol=1e-5, rtol=1e-4)


def test_softmax_single_head_blocks_sum_to_a_multi_head_block(reference):
    """DARTFormer Sec. 3.2: H single-head blocks with their own projections equal one H-head block."""
    torch.manual_seed(1)
    multi = build_mechanism("softmax", 16, heads=2)
    singles = [build_mechanism("softmax", 16, heads=1, head_dim=8) for _ in range(2)]
    with torch.no_grad():
        for h, s in enumerate(singles):
            rows = slice(8 * h, 8 * h + 8)
            for name in ("q", "k", "v"):
                getattr(s, name).weight.copy_(getattr(multi, name).weight[rows])
                getattr(s, name).bias.copy_(getattr(multi, name).bias[rows])
            s.out.weight.copy_(multi.out.weight[:, rows])
            s.out.bias.copy_(multi.out.bias / 2)
    x, mask = reference.padded_inputs(dim=16)
    torch.testing.assert_close(singles[0](x, mask) + singles[1](x, mask), multi(x, mask), atol=1e-5, rtol=1e-4)
