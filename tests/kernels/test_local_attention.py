"""Kernel local_attention (compiled, CPU) against the eager definition of local self-attention, and where it does not apply."""

from __future__ import annotations

import pytest
import torch

import attnas.kernels.local_attention as kernel_module
from compiled_kernels import disable_kernel, eager_twin, kernel_enabled, kernel_off, kernels_off, loaded_kernel
from local_attention_inputs import local_attention_inputs

from attnas.kernels.local_attention import local_attention_fused
from attnas.kernels.local_attention_flat import local_attention_flat
from attnas.ops.fullattn.local_self_attention import LocalSelfAttention, local_attention


@pytest.fixture(scope="module")
def kernel():
    """The compiled kernel (skipped without a compiler)."""
    return loaded_kernel(kernel_module)


def _compare_modules(fused, ref, x, out_tol, grad_tol):
    """``fused`` with ``ref``'s weights: same output, same gradients (input and weights); returns the output."""
    ref.load_state_dict(fused.state_dict())
    y = fused(x)
    torch.testing.assert_close(y, ref(x), rtol=out_tol, atol=out_tol)
    g_fused = torch.autograd.grad(y.square().sum(), [x, *fused.parameters()])
    g_ref = torch.autograd.grad(ref(x).square().sum(), [x, *ref.parameters()])
    for a, b in zip(g_fused, g_ref):
        torch.testing.assert_close(a, b, rtol=grad_tol, atol=grad_tol)
    return y


def _compare(fused, ref, inputs, tol):
    torch.testing.assert_close(fused, ref, rtol=tol, atol=tol)
    grad = torch.randn_like(ref)
    g_ref = torch.autograd.grad(ref, inputs, grad)
    g_fused = torch.autograd.grad(fused, inputs, grad)
    for name, a, b in zip(("q", "k", "v", "rel_row", "rel_col"), g_fused, g_ref):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol, msg=lambda m, name=name: f"d{name}: {m}")


@pytest.mark.parametrize("ks", [3, 5, 7])
@pytest.mark.parametrize("heads", [4, 8])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("save_attention", [False, True])
def test_fused_matches_unfold_reference_float64(kernel, ks, heads, stride, save_attention):
    # 9x5 maps: smaller than the window in one direction (every border case); the 3 images
    # give a flat query count that is not a multiple of the 16-query tile
    inputs = local_attention_inputs(3, 16, 9, 5, ks, seed=ks * 10 + heads + stride)
    ref = local_attention(*inputs, heads, stride)
    fused = local_attention_fused(*inputs, heads, stride, save_attention=save_attention)
    assert fused.shape == ref.shape == (3, 16, -(-9 // stride), -(-5 // stride))
    _compare(fused, ref, inputs, 1e-10)


@pytest.mark.parametrize("ks, stride", [(9, 1), (3, 3), (1, 1)])
def test_fused_generic_window_and_stride_paths(kernel, ks, stride):
    # windows other than 3/5/7 and strides other than 1 run the kernel's run-time-size code
    inputs = local_attention_inputs(2, 8, 11, 10, ks, seed=ks + stride)
    _compare(local_attention_fused(*inputs, 2, stride), local_attention(*inputs, 2, stride), inputs, 1e-10)


@pytest.mark.parametrize("ks", [3, 7])
def test_fused_matches_reference_in_float32(kernel, ks):
    # the kernel's float32 exp is a polynomial (relative error ~1e-7)
    inputs = local_attention_inputs(4, 32, 12, 11, ks, dtype=torch.float32, seed=3)
    _compare(local_attention_fused(*inputs, 8), local_attention(*inputs, 8), inputs, 1e-5)


def test_fused_passes_gradcheck(kernel):
    q, k, v, rr, rc = local_attention_inputs(2, 4, 4, 3, 3, seed=7)
    assert torch.autograd.gradcheck(lambda *t: local_attention_fused(*t, 2), (q, k, v, rr, rc))


def test_fused_masks_out_of_image_neighbours(kernel):
    q, k, _, rr, rc = local_attention_inputs(1, 8, 6, 5, 5, seed=1)
    v = torch.full((1, 8, 6, 5), 3.0, dtype=torch.float64)
    out = local_attention_fused(q, k, v, rr, rc, 4)
    torch.testing.assert_close(out, torch.full_like(out, 3.0))


def test_fused_without_grad_and_with_threads(kernel):
    inputs = [t.detach() for t in local_attention_inputs(3, 16, 7, 8, 3, dtype=torch.float32, seed=5)]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with torch.no_grad():
            out = local_attention_fused(*inputs, 4)
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(out, local_attention(*inputs, 4), rtol=1e-5, atol=1e-5)


def test_module_fused_matches_unfold(kernel):
    torch.manual_seed(0)
    fused = LocalSelfAttention(6, 16, kernel_size=5, heads=4, stride=2)
    ref = eager_twin(fused)
    x = torch.randn(2, 6, 7, 9, requires_grad=True)
    y = _compare_modules(fused, ref, x, out_tol=1e-5, grad_tol=1e-4)
    assert y.shape == (2, 16, 4, 5)


@pytest.mark.parametrize("how", ["no compiler", "ATTNAS_NO_KERNELS"])
def test_without_the_library_the_layer_runs_the_flat_kernel(monkeypatch, how):
    kernel_enabled("local_attention_flat")
    # a fresh loader state that cannot build: one warning (no compiler), then the eager
    # forward, whose attend hook takes the flat PyTorch kernel
    disable_kernel(monkeypatch, kernel_module, how)
    inputs = local_attention_inputs(2, 8, 6, 7, 3, seed=4)
    torch.manual_seed(5)
    layer = LocalSelfAttention(4, 8, kernel_size=3, heads=2).double()
    x = torch.randn(2, 4, 6, 7, dtype=torch.float64)
    if how == "no compiler":
        with pytest.warns(RuntimeWarning, match="no C\\+\\+ compiler.*attnas-no-such-compiler"):
            y = layer(x)
    else:
        y = layer(x)
        assert "ATTNAS_NO_KERNELS" in kernel_module.LIBRARY.unavailable_reason()
    assert kernel_module.LIBRARY.load() is None
    assert local_attention_fused(*inputs, 4) is NotImplemented
    q, k, v = layer.project(x)
    torch.testing.assert_close(y, local_attention_flat(q, k, v, layer.rel_row, layer.rel_col, 2), rtol=0, atol=0)


def test_non_kernel_dtypes_are_not_taken():
    inputs = [t.detach().to(torch.bfloat16) for t in local_attention_inputs(1, 8, 5, 5, 3, seed=6)]
    assert not kernel_module.applies(*inputs)
    assert local_attention_fused(*inputs, 4) is NotImplemented
    layer = LocalSelfAttention(4, 8, kernel_size=3, heads=2).to(torch.bfloat16)
    out = layer(torch.randn(1, 4, 5, 5, dtype=torch.bfloat16))
    assert out.dtype == torch.bfloat16 and out.shape == (1, 8, 5, 5)


def test_kernel_off_gives_the_flat_kernel_bit_for_bit(kernel, monkeypatch):
    torch.manual_seed(6)
    layer = LocalSelfAttention(4, 8, kernel_size=3, heads=2)
    x = torch.randn(2, 4, 9, 9)
    y = layer(x)
    kernel_off(monkeypatch, "local_attention")
    y_flat = layer(x)
    torch.testing.assert_close(y, y_flat, rtol=1e-5, atol=1e-5)
    q, k, v = layer.project(x)
    torch.testing.assert_close(y_flat, local_attention_flat(q, k, v, layer.rel_row, layer.rel_col, 2), rtol=0, atol=0)


@pytest.mark.parametrize("ks, heads", [(3, 8), (7, 4)])
def test_module_fused_projection_path_matches_unfold(kernel, ks, heads):
    # stride 1: the module projects straight into the kernel's packed buffer
    torch.manual_seed(1)
    fused = LocalSelfAttention(5, 16, kernel_size=ks, heads=heads).double()
    ref = eager_twin(fused)
    x = torch.randn(3, 5, 8, 6, dtype=torch.float64, requires_grad=True)
    _compare_modules(fused, ref, x, out_tol=1e-10, grad_tol=1e-10)


def test_relaxed_network_fused_matches_eager(kernel):
    # the whole relaxed search network (all seven candidates per layer) with the kernel
    from attnas.models.stagewise_network import RelaxedStagewiseNetwork

    torch.manual_seed(2)
    fused = RelaxedStagewiseNetwork(1, 10, init_channels=8, reduction=1).double()
    with torch.no_grad():
        fused.alpha.normal_()
    fast = eager_twin(fused)
    x = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    out_fused = fused.features(x)
    with kernels_off():
        out_fast = fast.features(x)
    torch.testing.assert_close(out_fused, out_fast, rtol=1e-9, atol=1e-9)
    used = [name for name, _ in fast.named_parameters() if not name.startswith("classifier")]
    with kernels_off():
        g_fast = torch.autograd.grad(out_fast.square().sum(), [fast.get_parameter(n) for n in used])
    g_fused = torch.autograd.grad(out_fused.square().sum(), [fused.get_parameter(n) for n in used])
    for name, a, b in zip(used, g_fused, g_fast):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-8, msg=lambda m, name=name: f"{name}: {m}")


def test_fused_accepts_channels_last_and_slicedlocal_attention_inputs(kernel):
    torch.manual_seed(3)
    fused = LocalSelfAttention(4, 8, kernel_size=3, heads=2)
    ref = eager_twin(fused)
    x = torch.randn(3, 4, 7, 6).to(memory_format=torch.channels_last)
    torch.testing.assert_close(fused(x), ref(x), rtol=1e-5, atol=1e-5)
    q, k, v, rr, rc = local_attention_inputs(2, 8, 6, 10, 3, seed=8)
    q, k, v = q[..., ::2], k[..., ::2], v[..., ::2]  # non-contiguous views
    torch.testing.assert_close(local_attention_fused(q, k, v, rr, rc, 4),
                               local_attention(q, k, v, rr, rc, 4), rtol=1e-10, atol=1e-10)
