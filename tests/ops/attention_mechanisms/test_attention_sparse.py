"""Sparse Transformer (strided) equals dense attention over the union of same-block and same-offset keys."""

import pytest
import torch

from attnas.ops.attention_mechanisms import build_mechanism
from attention_reference import reference  # noqa: F401  (the fixture)


@pytest.mark.parametrize("stride", [4, 6])
def test_sparse_equals_strided_plus_local_reference(stride, reference):
    torch.manual_seed(0)
    block = build_mechanism("sparse", 16, heads=2, stride=stride)
    x, mask = reference.padded_inputs(dim=16)
    q, k, v = reference.block_qkv(block, x)
    i = torch.arange(x.shape[1])
    same_block = (i[:, None] // stride) == (i[None, :] // stride)
    strided = ((i[:, None] - i[None, :]) % stride) == 0
    allowed = (same_block | strided)[None, None] & mask[:, None, None, :]
    expected = reference.finish(block, reference.dense_attention(q, k, v, allowed), mask)
    torch.testing.assert_close(block(x, mask), expected, atol=1e-5, rtol=1e-4)


def test_sparse_default_stride_is_sqrt_max_len():
    assert build_mechanism("sparse", 8, heads=1, max_len=1000).stride == 32
