"""Stem, pooling head and the Transformer baseline: shapes, masking, pad invariance."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.models.text_encoder import (MaskedPoolingHead, TextStem, TransformerTextClassifier,
                                        sinusoidal_positions)
from attnas.ops.autoattend.sequence_context import SequenceContext
from attnas.tasks.text_classification import TextBatch

V, D, H, C = 30, 6, 16, 3


def make_batch(lengths, L, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    mask = torch.arange(L)[None] < lengths[:, None]
    tokens = torch.randint(2, V, (len(lengths), L), generator=g).masked_fill(~mask, 0)
    return TextBatch(tokens, mask, lengths, torch.zeros(len(lengths), dtype=torch.long), lengths.clone())


def pad_more(batch: TextBatch, extra: int) -> TextBatch:
    B, L = batch.tokens.shape
    tokens = torch.cat([batch.tokens, torch.zeros(B, extra, dtype=torch.long)], 1)
    mask = torch.cat([batch.mask, torch.zeros(B, extra, dtype=torch.bool)], 1)
    return TextBatch(tokens, mask, batch.lengths, batch.y, batch.lengths_cpu)


def embeddings():
    return torch.randn(V, D, generator=torch.Generator().manual_seed(1))


def test_stem_shapes_zero_pads_and_finetunes():
    stem = TextStem(embeddings(), H, dropout=0.0)
    batch = make_batch([3, 5], 6)
    h, ctx = stem(batch)
    assert h.shape == (2, 6, H) and isinstance(ctx, SequenceContext)
    assert torch.all(h[~batch.mask] == 0)
    h.sum().backward()
    grad = stem.embedding.weight.grad
    assert grad[batch.tokens[batch.mask]].abs().sum() > 0  # fine-tuned
    assert torch.all(grad[0] == 0)  # the padding row gets no gradient
    torch.testing.assert_close(stem.embedding.weight.data, embeddings())  # initialised from the matrix


def test_stem_freeze():
    stem = TextStem(embeddings(), H, freeze=True)
    assert not stem.embedding.weight.requires_grad


def test_pooling_head_matches_reference():
    h = torch.randn(2, 5, H)
    ctx = SequenceContext.from_lengths(torch.tensor([2, 5]), 5)
    h = h.masked_fill(ctx.pad, 100.0)  # pads must be ignored even when large
    for pooling in ("max", "mean", "max+mean"):
        head = MaskedPoolingHead(H, C, pooling=pooling)
        pooled = head.pool(h, ctx)
        ref_max = torch.stack([h[0, :2].max(0).values, h[1].max(0).values])
        ref_mean = torch.stack([h[0, :2].mean(0), h[1].mean(0)])
        ref = {"max": ref_max, "mean": ref_mean, "max+mean": torch.cat([ref_max, ref_mean], -1)}[pooling]
        torch.testing.assert_close(pooled, ref)
        assert head(h, ctx).shape == (2, C)
    with pytest.raises(ConfigError, match="pooling"):
        MaskedPoolingHead(H, C, pooling="sum")


def test_stem_and_head_are_pad_invariant():
    stem, head = TextStem(embeddings(), H).eval(), MaskedPoolingHead(H, C).eval()
    batch = make_batch([2, 4, 1], 4)
    out = head(*stem(batch))
    out_long = head(*stem(pad_more(batch, 7)))
    torch.testing.assert_close(out, out_long)


def test_transformer_baseline_pad_invariant_and_trains():
    torch.manual_seed(0)
    model = TransformerTextClassifier(embeddings(), C, hidden=H, layers=2, heads=4, max_len=16).eval()
    batch = make_batch([3, 6, 2], 6)
    with torch.no_grad():
        torch.testing.assert_close(model(batch), model(pad_more(batch, 5)), atol=1e-5, rtol=1e-5)
    assert len(model.encoder.layers) == 2
    model.train()
    loss = torch.nn.functional.cross_entropy(model(batch), batch.y)
    loss.backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if p.requires_grad)


def test_transformer_rejects_too_long_input():
    model = TransformerTextClassifier(embeddings(), C, hidden=H, layers=1, heads=4, max_len=4)
    with pytest.raises(ConfigError, match="max_len"):
        model(make_batch([5], 5))


def test_sinusoidal_positions_formula():
    pe = sinusoidal_positions(3, 4)
    assert pe.shape == (3, 4)
    torch.testing.assert_close(pe[2, 0], torch.sin(torch.tensor(2.0)))
    torch.testing.assert_close(pe[2, 3], torch.cos(torch.tensor(2.0 / 10000 ** (2 / 4))))


def test_from_task_needs_text_embeddings():
    class Info:
        extra = {}
        num_classes = 2

    with pytest.raises(ConfigError, match="embeddings"):
        TextStem.from_task(Info(), H)
