"""Shared helpers of the attention-mechanism tests: inputs with padding and a dense reference.

A plain module (not a conftest.py: a second `conftest` module would shadow tests/conftest.py
for `from conftest import ...`); test files import the `reference` fixture from it.
"""

from __future__ import annotations

import pytest
import torch


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
                    scale: float | None = None) -> torch.Tensor:
    """Naive softmax attention over an explicit ``allowed [B or 1, 1 or H, L, L]`` pattern."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v  # rows with no allowed key: zero


def block_qkv(block, x):
    """The block's own per-head queries, keys and values ``[B, H, L, d]``."""
    return tuple(block.split_heads(p(x)) for p in (block.q, block.k, block.v))


def finish(block, heads_out: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Merge heads, apply the output projection and zero padded positions."""
    b, h, n, d = heads_out.shape
    return block.out(heads_out.transpose(1, 2).reshape(b, n, h * d)) * mask[..., None]


def padded_inputs(batch: int = 3, length: int = 37, dim: int = 16, seed: int = 0):
    """Random ``x`` and a right-padding mask with sequences of different lengths."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, dim, generator=g)
    lengths = torch.tensor([length, length - 7, 5][:batch])
    mask = torch.arange(length)[None] < lengths[:, None]
    return x, mask


@pytest.fixture
def reference():
    """The helpers above, as a namespace."""

    class R:
        pass

    r = R()
    r.dense_attention = dense_attention
    r.block_qkv = block_qkv
    r.finish = finish
    r.padded_inputs = padded_inputs
    return r
