"""batch_norm_sigmoid: the compiled sigmoid(BN(z)) against F.batch_norm + torch.sigmoid."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnas.kernels.gate_norm as kernel_module
from attnas.kernels.gate_norm import kernel_applies
from attnas.ops.gate_norm import batch_norm_sigmoid
from compiled_kernels import disable_kernel, loaded_kernel, torch_threads

# (B, G, H, W): the cell's diagonal (four edges) and a node's fan-out, odd sizes, one image,
# one position per plane.
SHAPES = [(4, 4, 8, 8), (3, 3, 5, 7), (2, 1, 9, 4), (1, 2, 3, 3), (5, 2, 1, 1)]


@pytest.fixture(scope="module")
def kernel():
    """The compiled kernel (skipped without a compiler)."""
    return loaded_kernel(kernel_module)


def _case(shape, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    G = shape[1]
    z = (3 * torch.randn(shape, generator=gen, dtype=dtype) + 1).requires_grad_()
    w = (torch.rand(G, generator=gen, dtype=dtype) + 0.5).requires_grad_()
    b = torch.randn(G, generator=gen, dtype=dtype).requires_grad_()
    rm, rv = torch.randn(G, generator=gen, dtype=dtype), torch.rand(G, generator=gen, dtype=dtype) + 0.5
    return z, w, b, rm, rv


def _compare(shape, dtype, tol):
    z, w, b, rm, rv = _case(shape, dtype)
    ze, we, be = (t.detach().double().requires_grad_() for t in (z, w, b))
    rme, rve = rm.double(), rv.double()
    got = batch_norm_sigmoid(z, rm, rv, w, b, True, 0.1, 1e-5)
    want = torch.sigmoid(F.batch_norm(ze, rme, rve, we, be, True, 0.1, 1e-5))
    assert type(got.grad_fn).__name__ == "_BatchNormSigmoidBackward"  # the kernel ran
    torch.testing.assert_close(got, want.to(dtype), rtol=tol, atol=tol)
    ds = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for g, r in zip(torch.autograd.grad(got, (z, w, b), ds.to(dtype)), torch.autograd.grad(want, (ze, we, be), ds)):
        torch.testing.assert_close(g, r.to(dtype), rtol=tol, atol=tol)
    torch.testing.assert_close(rm, rme.to(dtype), rtol=tol, atol=tol)
    torch.testing.assert_close(rv, rve.to(dtype), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_equals_batch_norm_and_sigmoid_in_float64(kernel, shape):
    _compare(shape, torch.float64, 1e-10)


@pytest.mark.parametrize("threads", [1, 2])
def test_kernel_in_float32_at_the_cells_size(kernel, threads):
    with torch_threads(threads):
        _compare((16, 4, 32, 32), torch.float32, 1e-5)


def test_result_does_not_depend_on_the_thread_count(kernel):
    """Per-plane sums are reduced in image order: one and two threads agree bit for bit."""
    results = []
    for threads in (1, 2):
        with torch_threads(threads):
            z, w, b, rm, rv = _case((16, 3, 16, 16), torch.float32, seed=4)
            s = batch_norm_sigmoid(z, rm, rv, w, b, True, 0.1, 1e-5)
            results.append([s, *torch.autograd.grad(s, (z, w, b), torch.ones_like(s)), rm, rv])
    for a, c in zip(*results):
        assert torch.equal(a, c)


def test_kernel_passes_gradcheck(kernel):
    z, w, b, _, _ = _case((2, 2, 3, 4), torch.float64, seed=2)
    assert torch.autograd.gradcheck(lambda *t: batch_norm_sigmoid(*t[:1], None, None, *t[1:], True, 0.1, 1e-5),
                                    (z, w, b))


def test_evaluation_uses_the_running_statistics(kernel):
    z, w, b, rm, rv = _case((3, 2, 4, 4), torch.float64)
    s = batch_norm_sigmoid(z, rm, rv, w, b, False, 0.1, 1e-5)
    assert type(s.grad_fn).__name__ != "_BatchNormSigmoidBackward"
    torch.testing.assert_close(s, torch.sigmoid(F.batch_norm(z, rm, rv, w, b, False, 0.1, 1e-5)))


def test_one_value_per_channel_is_left_to_batch_norms_error(kernel):
    z, w, b, rm, rv = _case((1, 2, 1, 1), torch.float64)
    assert not kernel_applies(z, w, b)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        batch_norm_sigmoid(z, rm, rv, w, b, True, 0.1, 1e-5)


@pytest.mark.parametrize("how", ["no compiler", "ATTNAS_NO_KERNELS"])
def test_fallback_without_the_kernel(monkeypatch, how):
    disable_kernel(monkeypatch, kernel_module, how)
    z, w, b, rm, rv = _case((3, 2, 4, 4), torch.float64)
    rm2, rv2 = rm.clone(), rv.clone()
    s = batch_norm_sigmoid(z, rm, rv, w, b, True, 0.1, 1e-5)
    assert type(s.grad_fn).__name__ != "_BatchNormSigmoidBackward"
    torch.testing.assert_close(s, torch.sigmoid(F.batch_norm(z, rm2, rv2, w, b, True, 0.1, 1e-5)))
    assert torch.equal(rm, rm2) and torch.equal(rv, rv2)
    assert kernel_module.LIBRARY.unavailable_reason()


def test_no_affine_parameters_use_batch_norm(kernel):
    z, _, _, rm, rv = _case((3, 2, 4, 4), torch.float64)
    rm2, rv2 = rm.clone(), rv.clone()
    s = batch_norm_sigmoid(z, rm, rv, None, None, True, 0.1, 1e-5)
    torch.testing.assert_close(s, torch.sigmoid(F.batch_norm(z, rm2, rv2, None, None, True, 0.1, 1e-5)))
