"""Local multi-head self-attention: the fast implementation against the unfold reference."""

from __future__ import annotations

import pytest
import torch

from local_attention_inputs import local_attention_inputs

from attnas.errors import ConfigError, DataError
from attnas.ops.local_self_attention import (
    LocalSelfAttention,
    local_attention,
    local_attention_reference,
    relative_embedding_table,
)


@pytest.mark.parametrize("ks", [3, 5, 7])
@pytest.mark.parametrize("heads", [4, 8])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("save_attention", [True, False])
def test_fast_matches_unfold_reference_values_and_gradients(ks, heads, stride, save_attention):
    # odd sizes smaller than the window in one direction exercise every border case;
    # three images in chunks of two exercise a short last chunk
    q, k, v, rr, rc = local_attention_inputs(3, 16, 9, 5, ks, seed=ks * 10 + heads + stride)
    ref = local_attention_reference(q, k, v, rr, rc, heads, stride)
    fast = local_attention(q, k, v, rr, rc, heads, stride, chunk_size=2, save_attention=save_attention)
    assert fast.shape == ref.shape == (3, 16, -(-9 // stride), -(-5 // stride))
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    grad = torch.randn_like(ref)
    g_ref = torch.autograd.grad(ref, (q, k, v, rr, rc), grad)
    g_fast = torch.autograd.grad(fast, (q, k, v, rr, rc), grad)
    for a, b in zip(g_fast, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


def test_fast_matches_reference_in_float32_with_default_chunks():
    q, k, v, rr, rc = local_attention_inputs(5, 32, 12, 11, 7, dtype=torch.float32, seed=3)
    torch.testing.assert_close(local_attention(q, k, v, rr, rc, 8), local_attention_reference(q, k, v, rr, rc, 8),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride, save_attention", [(1, True), (2, False)])
def test_fast_passes_gradcheck(stride, save_attention):
    q, k, v, rr, rc = local_attention_inputs(2, 4, 4, 3, 3, seed=7)
    assert torch.autograd.gradcheck(
        lambda *t: local_attention(*t, 2, stride, chunk_size=1, save_attention=save_attention), (q, k, v, rr, rc)
    )


@pytest.mark.parametrize("impl", [local_attention, local_attention_reference])
def test_out_of_image_neighbours_are_masked(impl):
    # constant values: with masking every output equals the constant, borders included
    # (zero padding would pull border outputs towards zero)
    q, k, _, rr, rc = local_attention_inputs(1, 8, 6, 5, 5, seed=1)
    v = torch.full((1, 8, 6, 5), 3.0, dtype=torch.float64)
    out = impl(q, k, v, rr, rc, 4)
    torch.testing.assert_close(out, torch.full_like(out, 3.0))


def test_corner_query_attends_only_to_its_in_image_window():
    # one head, no relative term: the top-left query sees the 2x2 in-image part of its 3x3 window
    q, k, v, _, _ = local_attention_inputs(1, 2, 4, 4, 3, seed=2)
    zeros = torch.zeros(1, 3, dtype=torch.float64)
    out = local_attention(q, k, v, zeros, zeros, heads=1)
    keys = k[0, :, :2, :2].reshape(2, 4)
    vals = v[0, :, :2, :2].reshape(2, 4)
    w = torch.softmax(q[0, :, 0, 0] @ keys, dim=0)
    torch.testing.assert_close(out[0, :, 0, 0], vals @ w)


def test_relative_table_uses_row_offsets_then_column_offsets():
    rr = torch.arange(6.0).view(2, 3)
    rc = -torch.arange(6.0).view(2, 3)
    r = relative_embedding_table(rr, rc)
    assert r.shape == (4, 3, 3)
    assert torch.equal(r[1, 2, 0], rr[1, 2]) and torch.equal(r[3, 0, 1], rc[1, 1])


@pytest.mark.parametrize("unfold_below", [0, 1 << 30])  # flat path forced / tiny-map dispatch
def test_module_fast_and_unfold_agree_and_stride_shape(monkeypatch, unfold_below):
    import attnas.ops.local_self_attention as module

    monkeypatch.setattr(module, "UNFOLD_BELOW", unfold_below)
    torch.manual_seed(0)
    fast = LocalSelfAttention(6, 16, kernel_size=5, heads=4, stride=2)
    ref = LocalSelfAttention(6, 16, kernel_size=5, heads=4, stride=2, impl="unfold")
    ref.load_state_dict(fast.state_dict())
    x = torch.randn(2, 6, 7, 9)
    y = fast(x)
    assert y.shape == (2, 16, 4, 5)
    torch.testing.assert_close(y, ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kernel_size": 4}, "odd"),
        ({"heads": 3}, "divisible by heads=3"),
        ({"impl": "cuda"}, "unknown impl 'cuda'"),
    ],
)
def test_module_rejects_bad_options(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        LocalSelfAttention(4, 16, **kwargs)


def test_bad_input_shapes_are_named():
    with pytest.raises(DataError, match=r"expects \[B, 4, H, W\]"):
        LocalSelfAttention(4, 8)(torch.randn(1, 3, 5, 5))
    q, k, v, rr, rc = local_attention_inputs(1, 8, 5, 5, 3)
    with pytest.raises(DataError, match="rel_row and rel_col"):
        local_attention(q, k, v, rr[:, :2], rc[:, :2], 4)
    with pytest.raises(ConfigError, match="cannot be split into 3 heads"):
        local_attention(q, k, v, rr, rc, 3)
