"""Local attention equals dense attention restricted to same (or neighbouring) chunks."""

import pytest
import torch

from attnas.ops.attention_mechanisms import build_mechanism
from attention_reference import reference  # noqa: F401  (the fixture)


@pytest.mark.parametrize("look_around", [0, 1])
def test_local_equals_chunk_restricted_reference(look_around, reference):
    torch.manual_seed(0)
    block = build_mechanism("local", 16, heads=2, window=6, look_around=look_around)
    x, mask = reference.padded_inputs(dim=16)
    q, k, v = reference.block_qkv(block, x)
    chunk = torch.arange(x.shape[1]) // 6
    allowed = ((chunk[:, None] - chunk[None, :]).abs() <= look_around)[None, None] & mask[:, None, None, :]
    expected = reference.finish(block, reference.dense_attention(q, k, v, allowed), mask)
    torch.testing.assert_close(block(x, mask), expected, atol=1e-5, rtol=1e-4)
