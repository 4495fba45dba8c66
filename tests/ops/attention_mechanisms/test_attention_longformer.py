"""Longformer equals a dense reference: band |i - j| <= w/2 plus global tokens with their own projections."""

import pytest
import torch

from attnas.ops.attention_mechanisms import build_mechanism
from attention_reference import reference  # noqa: F401  (the fixture)


@pytest.mark.parametrize("global_tokens", [0, 1, 3])
def test_longformer_equals_dense_reference(global_tokens, reference):
    torch.manual_seed(0)
    block = build_mechanism("longformer", 16, heads=2, window=6, global_tokens=global_tokens)
    x, mask = reference.padded_inputs(dim=16)
    n, g, r = x.shape[1], global_tokens, 3
    q, k, v = reference.block_qkv(block, x)
    i = torch.arange(n)
    allowed = ((i[:, None] - i[None, :]).abs() <= r) | (i[None, :] < g)
    heads = reference.dense_attention(q, k, v, allowed[None, None] & mask[:, None, None, :])
    if g:
        qg, kg, vg = (block.split_heads(p(x)) for p in (block.q_global, block.k_global, block.v_global))
        full = mask[:, None, None, :].expand(-1, 1, g, -1)
        heads[:, :, :g] = reference.dense_attention(qg[:, :, :g], kg, vg, full)
    torch.testing.assert_close(block(x, mask), reference.finish(block, heads, mask), atol=1e-5, rtol=1e-4)
