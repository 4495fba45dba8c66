"""Kernel local_attention_flat (PyTorch, flat layout) against the eager definition of local self-attention."""

from __future__ import annotations

import pytest
import torch

import attnas.kernels.local_attention_flat as flat
from compiled_kernels import eager, eager_twin, kernel_enabled, kernel_off
from local_attention_inputs import local_attention_inputs

from attnas.kernels.local_attention_flat import local_attention_flat
from attnas.ops.fullattn.local_self_attention import LocalSelfAttention, local_attention


@pytest.mark.parametrize("ks", [3, 5, 7])
@pytest.mark.parametrize("heads", [4, 8])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("save_attention", [True, False])
def test_fast_matches_unfold_reference_values_and_gradients(ks, heads, stride, save_attention):
    # odd sizes smaller than the window in one direction exercise every border case;
    # three images in chunks of two exercise a short last chunk
    q, k, v, rr, rc = local_attention_inputs(3, 16, 9, 5, ks, seed=ks * 10 + heads + stride)
    ref = local_attention(q, k, v, rr, rc, heads, stride)
    fast = local_attention_flat(q, k, v, rr, rc, heads, stride, chunk_size=2, save_attention=save_attention)
    assert fast.shape == ref.shape == (3, 16, -(-9 // stride), -(-5 // stride))
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)
    grad = torch.randn_like(ref)
    g_ref = torch.autograd.grad(ref, (q, k, v, rr, rc), grad)
    g_fast = torch.autograd.grad(fast, (q, k, v, rr, rc), grad)
    for a, b in zip(g_fast, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


def test_fast_matches_reference_in_float32_with_default_chunks():
    q, k, v, rr, rc = local_attention_inputs(5, 32, 12, 11, 7, dtype=torch.float32, seed=3)
    torch.testing.assert_close(local_attention_flat(q, k, v, rr, rc, 8), local_attention(q, k, v, rr, rc, 8),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride, save_attention", [(1, True), (2, False)])
def test_fast_passes_gradcheck(stride, save_attention):
    q, k, v, rr, rc = local_attention_inputs(2, 4, 4, 3, 3, seed=7)
    assert torch.autograd.gradcheck(
        lambda *t: local_attention_flat(*t, 2, stride, chunk_size=1, save_attention=save_attention), (q, k, v, rr, rc)
    )


def test_flat_masks_out_of_image_neighbours():
    # constant values: with masking every output equals the constant, borders included
    q, k, _, rr, rc = local_attention_inputs(1, 8, 6, 5, 5, seed=1)
    v = torch.full((1, 8, 6, 5), 3.0, dtype=torch.float64)
    out = local_attention_flat(q, k, v, rr, rc, 4)
    torch.testing.assert_close(out, torch.full_like(out, 3.0))


def test_module_flat_and_unfold_agree_and_stride_shape(monkeypatch):
    kernel_enabled("local_attention_flat")
    kernel_off(monkeypatch, "local_attention")  # the compiled kernel would take the whole forward
    torch.manual_seed(0)
    fast = LocalSelfAttention(6, 16, kernel_size=5, heads=4, stride=2)
    ref = eager_twin(fast)
    x = torch.randn(2, 6, 7, 9)
    y = fast(x)
    assert y.shape == (2, 16, 4, 5)
    torch.testing.assert_close(y, ref(x), rtol=1e-5, atol=1e-5)


def test_module_fast_runs_the_flat_kernel_and_eager_without_it(monkeypatch):
    kernel_enabled("local_attention_flat")
    kernel_off(monkeypatch, "local_attention")
    calls = []
    monkeypatch.setattr(flat, "local_attention_flat", lambda *a, **k: calls.append(1) or local_attention_flat(*a, **k))
    torch.manual_seed(4)
    layer = LocalSelfAttention(8, 16, kernel_size=3, heads=4).double()
    x = torch.randn(4, 8, 24, 24, dtype=torch.float64, requires_grad=True)
    y = layer(x)
    assert len(calls) == 1
    y_eager = eager(layer, x)
    assert len(calls) == 1
    torch.testing.assert_close(y, y_eager, rtol=1e-10, atol=1e-10)
