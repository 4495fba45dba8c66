"""The relaxed HOGA cell's compiled gate kernels against PyTorch expressions, and the fallback."""

from __future__ import annotations

import pytest
import torch

import attnas.kernels.hoga_gates as kernel_module
from compiled_kernels import fresh_library, loaded_kernel, eager, kernel_off, kernels_off
from attnas.kernels.hoga_gates import cbam_pool, combine, gate_stats, grouped_mixed_op, kernels_apply
from attnas.ops.autola.hoga_relaxed import GroupedMixedOp, RelaxedHOGA
from attnas.ops.autola.attention_modules import HOGA_OPS


@pytest.fixture(scope="module")
def kernel():
    """The compiled kernels (skipped without a compiler)."""
    return loaded_kernel(kernel_module)


def _leaf(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()


def _assert_same(got_fn, want_fn, leaves, seed=9):
    got, want = got_fn(), want_fn()
    got, want = (got,) if torch.is_tensor(got) else got, (want,) if torch.is_tensor(want) else want
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)
    gen = torch.Generator().manual_seed(seed)
    upstream = [torch.randn(w.shape, generator=gen, dtype=w.dtype) for w in want]
    for g, w in zip(torch.autograd.grad(got, leaves, upstream), torch.autograd.grad(want, leaves, upstream)):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("Gx", [1, 3])
def test_gate_stats_are_the_four_poolings(kernel, Gx):
    x = _leaf(2, Gx, 4, 35)
    _assert_same(lambda: gate_stats(x), lambda: (x.mean(3), x.amax(3), x.mean(2), x.amax(2)), [x])


@pytest.mark.parametrize("Gx, G", [(1, 3), (3, 3)])
def test_cbam_pool_is_the_channel_pooling_of_the_gated_input(kernel, Gx, G):
    x, gc = _leaf(2, Gx, 4, 21), _leaf(2, G, 4, seed=1)
    y = lambda: x * gc[..., None]  # noqa: E731 (broadcasts Gx = 1 over the G edges)
    _assert_same(lambda: cbam_pool(x, gc), lambda: (y().mean(2), y().amax(2)), [x, gc])


@pytest.mark.parametrize("Gx, G, n_norm", [(1, 3, 2), (3, 3, 1), (2, 2, 0)])
def test_combine_is_the_gated_sum(kernel, Gx, G, n_norm):
    B, c, P = 2, 4, 15
    x, a, gs, chan, spat = _leaf(B, Gx, c, P), _leaf(B, G, c, seed=1), _leaf(B, G, P, seed=2), \
        _leaf(B, G, c, seed=3), _leaf(B, G, P, seed=4)
    zs = [_leaf(B, G, c, P, seed=5 + n) for n in range(n_norm)]
    ws = [_leaf(G, seed=8 + n) for n in range(n_norm)]

    def reference():
        gate = a[..., None] * gs[:, :, None] + chan[..., None] + spat[:, :, None]
        for z, w in zip(zs, ws):
            gate = gate + w[None, :, None, None] * torch.sigmoid(z)
        return x * gate

    _assert_same(lambda: combine(x, a, gs, chan, spat, zs, ws), reference, [x, a, gs, chan, spat, *zs, *ws])


def test_maxima_route_their_gradient_to_the_first_maximal_element(kernel):
    x = torch.zeros(1, 1, 3, 4, dtype=torch.float64, requires_grad=True)  # every element ties
    _, mx, _, cmax = gate_stats(x)
    (mx.sum() + cmax.sum()).backward()
    expected = torch.zeros(1, 1, 3, 4, dtype=torch.float64)
    expected[0, 0, :, 0] += 1  # spatial maximum of each channel: position 0
    expected[0, 0, 0, :] += 1  # channel maximum at each position: channel 0
    torch.testing.assert_close(x.grad, expected)


def _perturbed(module: torch.nn.Module) -> torch.nn.Module:
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in module.parameters():  # off the initial values (BN weights 1, biases 0)
            p.add_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module


@pytest.mark.parametrize("shared, G", [(False, 4), (True, 3), (True, 1)])
@pytest.mark.parametrize("ops", [HOGA_OPS, ("se", "norm_d2"), ("spatial_d2", "cbam", "zero"),
                                 ("identity", "norm_d1", "norm_d2")])
def test_grouped_mixed_op_compiled_equals_eager(kernel, shared, G, ops):
    m = _perturbed(GroupedMixedOp(G, 4, ops, shared_input=shared).double())
    x, w = _leaf(3, (1 if shared else G) * 4, 6, 7), _leaf(G, len(ops), seed=1)
    leaves = [x, w, *m.parameters()]
    _assert_same(lambda: grouped_mixed_op(m, x, w), lambda: eager(m, x, w), leaves)
    assert kernels_apply(x)


def test_relaxed_cell_in_float32_matches_eager_at_the_searchs_size(kernel, monkeypatch):
    torch.manual_seed(0)
    cell = _perturbed(RelaxedHOGA(16, 4))
    x = torch.randn(8, 16, 32, 32, requires_grad=True)
    y = cell(x)
    grads = torch.autograd.grad(y.square().sum(), [x, cell.alpha])
    kernel_off(monkeypatch, "hoga_gates")
    y_ref = cell(x)
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    for g, r in zip(grads, torch.autograd.grad(y_ref.square().sum(), [x, cell.alpha])):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)


def test_without_the_kernels_the_eager_path_runs(monkeypatch):
    monkeypatch.setattr(kernel_module, "LIBRARY", fresh_library(kernel_module))
    monkeypatch.setenv("ATTNAS_NO_KERNELS", "1")
    m = GroupedMixedOp(2, 4, HOGA_OPS).double()
    x = _leaf(2, 8, 5, 5)
    assert not kernels_apply(x)
    called = []
    monkeypatch.setattr(kernel_module, "_GateStats", None)  # the compiled path would fail
    assert m(x, torch.rand(2, len(HOGA_OPS), dtype=torch.float64)).shape == (2, 8, 5, 5)
    assert not called
    assert "ATTNAS_NO_KERNELS" in kernel_module.LIBRARY.unavailable_reason()
