"""AutoAttend's sequence attention layer (Eq. 8) against a straightforward reference."""

from __future__ import annotations

import math

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.ops.autoattend.sequence_attention import SelfAttentionOp, SequenceAttention
from attnas.ops.autoattend.sequence_context import SequenceContext

H, HEADS = 16, 8


def reference_attention(q, k, v, lengths, heads):
    """Eq. 8 written out per sequence and head: softmax(Q_i K_i^T / sqrt(d/h)) V_i."""
    B, L, d = q.shape
    dh = d // heads
    out = torch.zeros_like(q)
    for b, n in enumerate(lengths):
        for i in range(heads):
            sl = slice(i * dh, (i + 1) * dh)
            Q, K, V = q[b, :n, sl], k[b, :n, sl], v[b, :n, sl]
            out[b, :n, sl] = torch.softmax(Q @ K.T / math.sqrt(dh), dim=-1) @ V
    return out


def random_qkv(lengths, L, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(len(lengths), L, H, generator=g) for _ in range(3))
    ctx = SequenceContext.from_lengths(torch.tensor(lengths), L)
    # garbage at pad positions: the layer must ignore it
    q, k, v = (t.masked_fill(ctx.pad, 50.0) for t in (q, k, v))
    return q, k, v, ctx


def test_matches_reference_eq8():
    lengths = [4, 1, 6]
    q, k, v, ctx = random_qkv(lengths, 7)
    layer = SequenceAttention(H, HEADS, norm=False).eval()
    torch.testing.assert_close(layer(q, k, v, ctx), reference_attention(q, k, v, lengths, HEADS),
                               atol=1e-5, rtol=1e-5)


def test_pad_invariance_with_norm():
    lengths = [3, 5]
    layer = SequenceAttention(H, HEADS).eval()
    q, k, v, ctx = random_qkv(lengths, 5)
    q2, k2, v2, ctx2 = random_qkv(lengths, 9, seed=1)  # other garbage; real positions copied below
    q2[:, :5], k2[:, :5], v2[:, :5] = q, k, v
    y, y2 = layer(q, k, v, ctx), layer(q2, k2, v2, ctx2)
    torch.testing.assert_close(y2[:, :5][ctx.mask], y[ctx.mask])
    assert torch.all(y2[~ctx2.mask] == 0)


def test_layer_zeroes_pads_once_bit_for_bit_like_zeroing_twice():
    """Training mode (both dropouts on): the layer equals the composition that also zeroes
    the pad rows before dropout and LayerNorm, outputs and input gradients bit for bit."""
    from attnas.ops.autoattend.sequence_attention import masked_multihead_attention

    layer = SequenceAttention(H, HEADS, attn_dropout=0.2, dropout=0.3).train()
    with torch.no_grad():
        layer.norm.weight.uniform_(0.5, 1.5)
        layer.norm.bias.uniform_(-0.5, 0.5)
    q, k, v, ctx = random_qkv([4, 1, 6], 7)
    g = torch.randn(3, 7, H, generator=torch.Generator().manual_seed(3))

    def twice(q, k, v):
        out = masked_multihead_attention(q, k, v, ctx, HEADS, 0.2)  # pad rows zeroed here too
        return ctx.zero_pads(layer.norm(layer.dropout(out)))

    results = []
    for fn in (lambda *a: layer(*a, ctx), twice):
        torch.manual_seed(5)
        inputs = [t.clone().requires_grad_() for t in (q, k, v)]
        y = fn(*inputs)
        y.backward(g)
        results.append([y.detach()] + [t.grad for t in inputs])
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_no_projection_parameters_without_norm():
    assert list(SequenceAttention(H, HEADS, norm=False).parameters()) == []


def test_heads_must_divide_dim():
    with pytest.raises(ConfigError, match="heads"):
        SequenceAttention(12, 8)
    with pytest.raises(ConfigError, match="heads"):
        SelfAttentionOp(12, heads=8)


def test_self_attention_op_equals_projected_reference():
    lengths = [2, 5]
    q, _, _, ctx = random_qkv(lengths, 6)
    op = SelfAttentionOp(H, heads=4, pre_norm=False).eval()
    Wq, Wk, Wv = op.qkv.weight.chunk(3, dim=0)
    ref = reference_attention(q @ Wq.T, q @ Wk.T, q @ Wv.T, lengths, 4) @ op.out.weight.T
    ref = ref.masked_fill(ctx.pad, 0.0)
    torch.testing.assert_close(op(q, ctx), ref, atol=1e-5, rtol=1e-5)
