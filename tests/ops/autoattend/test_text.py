"""Text operations of Table 3: registry, pad invariance, and straightforward references."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnas import registry
from attnas.core.errors import ConfigError
from attnas.ops.autoattend.sequence_context import SequenceContext
from attnas.ops.autoattend.text import BASELINE_TEXT_POOL, DEFAULT_TEXT_POOL, GRUOp, MaskedConv1d

H = 16
LENGTHS = [5, 1, 7, 3]


def make_op(name: str, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    op = registry.create("op", name, H, group="text", **kw)
    return op.eval()


def padded_batch(lengths, L, seed=0, garbage=True):
    """Random real tokens; pad positions hold large garbage (they must not matter)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), max(lengths), H, generator=g)
    out = torch.full((len(lengths), L, H), 1e3 if garbage else 0.0)
    out[:, : x.shape[1]] = x
    ctx = SequenceContext.from_lengths(torch.tensor(lengths), L)
    out = torch.where(ctx.mask[:, :, None], out, out.new_full((), 1e3 if garbage else 0.0))
    return out, ctx


def test_pool_registered_with_default_flags():
    names = registry.names("op", "text")
    assert set(BASELINE_TEXT_POOL) <= set(names)
    for name in DEFAULT_TEXT_POOL:
        assert registry.get_entry("op", name, "text").extra["in_default_pool"] is True
    assert registry.get_entry("op", "self_attention", "text").extra["in_default_pool"] is False


@pytest.mark.parametrize("name", BASELINE_TEXT_POOL)
def test_pads_do_not_leak(name):
    """Real positions are identical whether the batch is padded to L or L + 5 (garbage pads)."""
    op = make_op(name)
    x, ctx = padded_batch(LENGTHS, max(LENGTHS))
    x_long, ctx_long = padded_batch(LENGTHS, max(LENGTHS) + 5)
    with torch.no_grad():
        y, y_long = op(x, ctx), op(x_long, ctx_long)
    assert y.shape == x.shape and y_long.shape == x_long.shape
    torch.testing.assert_close(y_long[:, : y.shape[1]][ctx.mask], y[ctx.mask], atol=1e-5, rtol=1e-5)
    assert torch.all(y[~ctx.mask] == 0) and torch.all(y_long[~ctx_long.mask] == 0)


@pytest.mark.parametrize("name", BASELINE_TEXT_POOL)
def test_batched_equals_each_sequence_alone(name):
    """A padded batch gives each sequence the output it gets when run alone, unpadded."""
    op = make_op(name)
    x, ctx = padded_batch(LENGTHS, max(LENGTHS) + 2)
    with torch.no_grad():
        y = op(x, ctx)
        for b, n in enumerate(LENGTHS):
            alone = op(x[b : b + 1, :n], SequenceContext.from_lengths(torch.tensor([n])))
            torch.testing.assert_close(y[b, :n], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", BASELINE_TEXT_POOL)
def test_backward_is_finite(name):
    op = make_op(name).train()
    x, ctx = padded_batch(LENGTHS, 9, garbage=False)
    x.requires_grad_(True)
    y = op(x, ctx)
    if name == "zero":
        assert not y.requires_grad and torch.all(y == 0)
        return
    y.square().sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad[ctx.mask].abs().sum() > 0
    assert torch.all(x.grad[~ctx.mask] == 0)


def test_conv3_matches_explicit_sum():
    op = make_op("conv3", pre_norm=False, activation=False)
    x, ctx = padded_batch([4, 2], 6)
    W, b = op.conv.weight, op.conv.bias  # [H_out, H_in, 3]
    with torch.no_grad():
        y = op(x, ctx)
        for s, n in enumerate([4, 2]):
            seq = x[s, :n]
            for t in range(n):
                ref = b.clone()
                for j, off in enumerate((-1, 0, 1)):
                    if 0 <= t + off < n:
                        ref += W[:, :, j] @ seq[t + off]
                torch.testing.assert_close(y[s, t], ref, atol=1e-5, rtol=1e-5)


def test_conv1_is_pointwise_linear_relu():
    op = make_op("conv1", pre_norm=False)
    x, ctx = padded_batch([3], 3, garbage=False)
    with torch.no_grad():
        torch.testing.assert_close(op(x, ctx), F.relu(x @ op.conv.weight.T + op.conv.bias))


def test_max_pool3_matches_window_max():
    op = make_op("max_pool3", pre_norm=False)
    x, ctx = padded_batch([4, 1], 6)
    y = op(x, ctx)
    for s, n in enumerate([4, 1]):
        for t in range(n):
            window = x[s, max(0, t - 1) : min(n, t + 2)]
            torch.testing.assert_close(y[s, t], window.max(0).values)


@pytest.mark.parametrize("directions", ["sum", "concat"])
def test_gru_equals_bidirectional_nn_gru_per_sequence(directions):
    """Each direction only sees the sequence's own tokens: compare with nn.GRU run on each sequence alone."""
    op = make_op("gru", pre_norm=False, directions=directions)
    reference = op.rnn  # the same nn.GRU, run on each sequence alone without packing
    hid = reference.hidden_size
    x, ctx = padded_batch([5, 2, 7], 8)
    with torch.no_grad():
        y = op(x, ctx)
        for s, n in enumerate([5, 2, 7]):
            out, _ = reference(x[s : s + 1, :n])
            expected = out[0, :, :hid] + out[0, :, hid:] if directions == "sum" else out[0]
            torch.testing.assert_close(y[s, :n], expected, atol=1e-5, rtol=1e-5)


def test_gru_backward_direction_matters():
    """The reverse direction really reads the future: changing the last token changes the first output."""
    op = make_op("gru", pre_norm=False)
    x, ctx = padded_batch([4], 4, garbage=False)
    x2 = x.clone()
    x2[0, 3] += 1.0
    with torch.no_grad():
        assert not torch.allclose(op(x, ctx)[0, 0], op(x2, ctx)[0, 0])
        forward_only = make_op("gru", pre_norm=False, directions="forward")
        torch.testing.assert_close(forward_only(x, ctx)[0, :3], forward_only(x2, ctx)[0, :3])


@pytest.mark.parametrize("directions", ["concat", "forward"])
def test_gru_direction_variants_keep_shape_and_pads(directions):
    op = make_op("gru", directions=directions)
    x, ctx = padded_batch(LENGTHS, 8)
    with torch.no_grad():
        y = op(x, ctx)
    assert y.shape == x.shape and torch.all(y[~ctx.mask] == 0)


def test_bad_options_raise_config_errors():
    with pytest.raises(ConfigError, match="odd"):
        MaskedConv1d(H, 2)
    with pytest.raises(ConfigError, match="directions"):
        GRUOp(H, directions="both")
    with pytest.raises(ConfigError, match="unknown op in pool 'text' 'conv5'"):
        registry.create("op", "conv5", H, group="text")
