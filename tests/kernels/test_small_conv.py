"""Few-channel convolutions: the compiled CPU kernel against ``conv2d``, and its fallback."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnas.kernels.small_conv as kernel_module
from compiled_kernels import disable_kernel, fresh_library, loaded_kernel, torch_threads
from attnas.kernels.small_conv import kernel_applies
from attnas.ops.autola.small_conv import depthwise_pair, small_conv2d

# (batch, C_in, C_out, groups, H, W, k, dilation, bias): the gates' shapes (depth-wise,
# 2 -> 1 per group, 2 -> G shared), odd sizes (tails of the vector loops), a 5 x 5 kernel.
SHAPES = [
    (3, 5, 5, 5, 7, 9, 3, 1, True),
    (2, 4, 2, 2, 9, 33, 3, 2, False),
    (2, 2, 3, 1, 6, 17, 7, 1, False),
    (2, 8, 4, 4, 12, 8, 7, 1, False),
    (2, 6, 3, 3, 5, 4, 7, 2, False),
    (1, 4, 4, 2, 6, 6, 5, 1, True),
    (1, 3, 3, 3, 6, 10, 1, 1, True),  # kernel sizes other than 3, 5, 7: the generic weight-gradient loop
    (1, 2, 2, 2, 6, 11, 9, 1, False),
    (0, 4, 4, 4, 5, 5, 3, 1, True),
]


@pytest.fixture(scope="module")
def kernel():
    """The compiled kernel (skipped without a compiler)."""
    return loaded_kernel(kernel_module)


def _reference(x, w, b, d, g):
    return F.conv2d(x, w, b, 1, d * (w.shape[-1] - 1) // 2, d, g)


def _inputs(B, cin, cout, g, H, W, k, bias, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, cin, H, W, generator=gen, dtype=dtype).requires_grad_()
    w = torch.randn(cout, cin // g, k, k, generator=gen, dtype=dtype).requires_grad_()
    b = torch.randn(cout, generator=gen, dtype=dtype).requires_grad_() if bias else None
    return x, w, b


def _compare(x, w, b, d, g, tol):
    """The kernel against ``F.conv2d`` in float64 (a float32 reference's own rounding in the
    weight gradient, a sum over B H W positions, can exceed ``tol``), with a seeded ``gout``."""
    leaves = [t for t in (x, w, b) if t is not None]
    exact = [t.detach().double().requires_grad_() for t in leaves]
    xe, we, be = exact[0], exact[1], exact[2] if b is not None else None
    y, ref = small_conv2d(x, w, b, d, g), _reference(xe, we, be, d, g)
    torch.testing.assert_close(y, ref.to(y.dtype), rtol=tol, atol=tol)
    gout = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for got, want in zip(torch.autograd.grad(y, leaves, gout.to(y.dtype)), torch.autograd.grad(ref, exact, gout)):
        torch.testing.assert_close(got, want.to(got.dtype), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", SHAPES)
def test_kernel_equals_conv2d_in_float64(kernel, shape):
    B, cin, cout, g, H, W, k, d, bias = shape
    _compare(*_inputs(B, cin, cout, g, H, W, k, bias, torch.float64), d, g, 1e-10)


@pytest.mark.parametrize("threads", [1, 2])
def test_kernel_equals_conv2d_in_float32_at_the_gates_sizes(kernel, threads):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for B, cin, cout, g, k, d in [(4, 16, 16, 16, 3, 2), (4, 8, 4, 4, 7, 1), (4, 2, 3, 1, 3, 1)]:
            _compare(*_inputs(B, cin, cout, g, 32, 32, k, cin == cout, torch.float32), d, g, 1e-4)
    finally:
        torch.set_num_threads(old)


def test_kernel_passes_gradcheck(kernel):
    x, w, b = _inputs(2, 4, 2, 2, 5, 6, 3, True, torch.float64, seed=3)
    assert torch.autograd.gradcheck(lambda *t: small_conv2d(*t, 2, 2), (x, w, b))


def test_kernel_takes_channels_last_and_sliced_inputs(kernel):
    x, w, _ = _inputs(2, 6, 6, 6, 8, 8, 3, False, torch.float64)
    cl = x.detach().contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(small_conv2d(cl, w, None, 1, 6), _reference(cl, w, None, 1, 6))
    part = x.detach()[:, 1:5]
    torch.testing.assert_close(small_conv2d(part, w[:4], None, 1, 4), _reference(part, w[:4], None, 1, 4))


def test_only_the_gradients_asked_for_are_computed(kernel):
    x, w, b = _inputs(2, 4, 4, 4, 6, 6, 3, True, torch.float64)
    (gw,) = torch.autograd.grad(small_conv2d(x.detach(), w, b, 1, 4).sum(), [w])
    torch.testing.assert_close(gw, torch.autograd.grad(_reference(x.detach(), w, b, 1, 4).sum(), [w])[0])


def test_bad_shapes_get_conv2d_errors_and_even_kernels_are_refused(kernel):
    x, w, _ = _inputs(1, 4, 4, 4, 5, 5, 3, False, torch.float32)
    with pytest.raises(RuntimeError):  # weight for 4 groups used with 2 groups
        small_conv2d(x, w, None, 1, 2)
    with pytest.raises(ValueError, match="odd size"):
        small_conv2d(x, torch.randn(4, 1, 2, 2), None, 1, 4)


def test_fallback_without_compiler_gives_conv2d(monkeypatch):
    monkeypatch.setattr(kernel_module, "LIBRARY", fresh_library(kernel_module))
    monkeypatch.setenv("CXX", "attnas-no-such-compiler")
    monkeypatch.delenv("ATTNAS_NO_KERNELS", raising=False)
    x, w, b = _inputs(2, 4, 4, 4, 6, 6, 3, True, torch.float64)
    assert not kernel_applies(x)
    assert "no C++ compiler" in kernel_module.LIBRARY.unavailable_reason()
    _compare(x, w, b, 2, 4, 1e-12)


def test_fallback_can_be_forced_by_environment(monkeypatch):
    monkeypatch.setattr(kernel_module, "LIBRARY", fresh_library(kernel_module))
    monkeypatch.setenv("ATTNAS_NO_KERNELS", "1")
    assert kernel_module.LIBRARY.load() is None
    assert "ATTNAS_NO_KERNELS" in kernel_module.LIBRARY.unavailable_reason()


def test_other_dtypes_use_conv2d():
    x = torch.randn(1, 2, 5, 5, dtype=torch.bfloat16)
    w = torch.randn(1, 2, 3, 3, dtype=torch.bfloat16)
    assert not kernel_applies(x)
    y = small_conv2d(x, w)
    assert y.dtype == torch.bfloat16 and y.shape == (1, 1, 5, 5)


def test_a_refused_call_raises_with_the_kernels_code(kernel):
    x, out = torch.zeros(1, 2, 4, 4), torch.zeros(1, 2, 4, 4)
    w = torch.zeros(2, 1, 2, 2)  # an even kernel: the library's own check refuses it (code 2)
    with pytest.raises(RuntimeError, match="small_conv.attnas_small_conv_forward failed with code 2"):
        kernel_module.LIBRARY.call("attnas_small_conv_forward", 0, x, w, None, out, 1, 2, 2, 2, 4, 4, 2, 1, 1)
    assert not out.any()


# (batch, C_in, C_out, H, W, d1, d2, bias): a node's fan-out (outputs a multiple of the inputs),
# the cell's diagonal (as many outputs as inputs), odd sizes, planes smaller than the padding.
PAIR_SHAPES = [
    (3, 4, 12, 9, 7, 1, 2, True),
    (2, 5, 5, 6, 11, 1, 2, True),
    (2, 3, 9, 4, 4, 2, 1, False),
    (1, 2, 4, 2, 3, 1, 2, True),
]


def _pair_reference(x, w1, b1, d1, w2, b2, d2):
    src = x.repeat(1, w1.shape[0] // x.shape[1], 1, 1)
    return (F.conv2d(src, w1, b1, 1, d1, d1, w1.shape[0]), F.conv2d(src, w2, b2, 1, d2, d2, w2.shape[0]))


def _pair_inputs(B, cin, cout, H, W, bias, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, cin, H, W, generator=gen, dtype=dtype).requires_grad_()
    ws = [torch.randn(cout, 1, 3, 3, generator=gen, dtype=dtype).requires_grad_() for _ in range(2)]
    bs = [torch.randn(cout, generator=gen, dtype=dtype).requires_grad_() if bias else None for _ in range(2)]
    return x, ws, bs


def _compare_pair(shape, dtype, tol):
    B, cin, cout, H, W, d1, d2, bias = shape
    x, (w1, w2), (b1, b2) = _pair_inputs(B, cin, cout, H, W, bias, dtype)
    leaves = [t for t in (x, w1, b1, w2, b2) if t is not None]
    exact = [t.detach().double().requires_grad_() for t in leaves]
    ex = dict(zip(["x", "w1", "b1", "w2", "b2"] if bias else ["x", "w1", "w2"], exact))
    got = depthwise_pair(x, w1, b1, d1, w2, b2, d2)
    want = _pair_reference(ex["x"], ex["w1"], ex.get("b1"), d1, ex["w2"], ex.get("b2"), d2)
    assert type(got[0].grad_fn).__name__ == "_DepthwisePairBackward"
    gen = torch.Generator().manual_seed(1)
    gouts = [torch.randn(want[0].shape, generator=gen, dtype=torch.float64) for _ in range(2)]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w.to(dtype), rtol=tol, atol=tol)
    grads = torch.autograd.grad(got, leaves, [g.to(dtype) for g in gouts])
    refs = torch.autograd.grad(want, exact, gouts)
    for g, r in zip(grads, refs):
        torch.testing.assert_close(g, r.to(dtype), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", PAIR_SHAPES)
def test_depthwise_pair_equals_two_convolutions_of_the_repeated_input(kernel, shape):
    _compare_pair(shape, torch.float64, 1e-10)


@pytest.mark.parametrize("threads", [1, 2])
def test_depthwise_pair_in_float32_at_the_search_size(kernel, threads):
    with torch_threads(threads):
        _compare_pair((8, 4, 12, 32, 32, 1, 2, True), torch.float32, 1e-4)


def test_depthwise_pair_passes_gradcheck(kernel):
    x, (w1, w2), (b1, b2) = _pair_inputs(2, 2, 4, 4, 5, True, torch.float64, seed=3)
    assert torch.autograd.gradcheck(lambda *t: depthwise_pair(t[0], t[1], t[2], 1, t[3], t[4], 2), (x, w1, b1, w2, b2))


@pytest.mark.parametrize("used", [0, 1])
def test_depthwise_pair_with_one_output_unused_and_only_the_input_gradient(kernel, used):
    x, (w1, w2), (b1, b2) = _pair_inputs(2, 3, 6, 5, 5, True, torch.float64)
    params = (w1.detach(), b1.detach(), 1, w2.detach(), b2.detach(), 2)
    (gx,) = torch.autograd.grad(depthwise_pair(x, *params)[used].sum(), x)
    (rx,) = torch.autograd.grad(_pair_reference(x, *params)[used].sum(), x)
    torch.testing.assert_close(gx, rx, rtol=1e-10, atol=1e-10)


def test_depthwise_pair_falls_back_without_the_kernel(monkeypatch):
    disable_kernel(monkeypatch, kernel_module, "ATTNAS_NO_KERNELS")
    x, (w1, w2), (b1, b2) = _pair_inputs(2, 3, 6, 5, 5, True, torch.float64)
    got = depthwise_pair(x, w1, b1, 1, w2, b2, 2)
    assert type(got[0].grad_fn).__name__ != "_DepthwisePairBackward"
    for g, w in zip(got, _pair_reference(x, w1, b1, 1, w2, b2, 2)):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)
