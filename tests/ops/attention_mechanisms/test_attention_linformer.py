"""Linformer equals softmax(Q (E K)^T / sqrt d) F V with padded keys zeroed."""

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.ops.attention_mechanisms import build_mechanism
from attention_reference import reference  # noqa: F401  (the fixture)


@pytest.mark.parametrize("share_kv", [False, True])
def test_linformer_equals_its_formula(share_kv, reference):
    torch.manual_seed(0)
    block = build_mechanism("linformer", 16, heads=2, max_len=50, k=6, share_kv=share_kv)
    x, mask = reference.padded_inputs(dim=16)
    n = x.shape[1]
    q, k, v = reference.block_qkv(block, x)
    keep = mask[:, None, :, None].float()
    e = block.E[:, :n]
    f = e if share_kv else block.F[:, :n]
    kp, vp = e @ (k * keep), f @ (v * keep)  # [B, H, k, d]
    heads = torch.softmax(q @ kp.transpose(-1, -2) / block.head_dim**0.5, -1) @ vp
    torch.testing.assert_close(block(x, mask), reference.finish(block, heads, mask), atol=1e-5, rtol=1e-4)
    assert (block.F is None) == share_kv


def test_linformer_rejects_sequences_longer_than_max_len():
    block = build_mechanism("linformer", 8, heads=1, max_len=10, k=4)
    with pytest.raises(ConfigError, match="exceeds max_len 10"):
        block(torch.randn(1, 11, 8))
