"""The compiled discrete attention modules (AutoLA Eqs. 4-8) against their PyTorch expressions."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import attnas.kernels.attention_gates as kernel_module
from compiled_kernels import fresh_library, loaded_kernel, eager, kernel_off, kernels_off
from attnas.kernels import attention_gates
from attnas.ops.autola.attention_modules import (
    CBAM, ChannelAttention, ChannelAttentionV2, NormalizationAttention, SpatialAttention, create_attention,
)

GATED = ("se", "channel_v2", "spatial_d1", "spatial_d2", "norm_d1", "norm_d2", "cbam")


@pytest.fixture(scope="module")
def kernel():
    """The compiled kernels (skipped without a compiler)."""
    return loaded_kernel(kernel_module)


def _module(name: str, channels: int, dtype: torch.dtype, seed: int = 3, **kwargs) -> nn.Module:
    """``name`` with its parameters moved off their initial values (BN weight 1, bias 0)."""
    torch.manual_seed(seed)
    m = (create_attention(name, channels, 2) if isinstance(name, str) else name(channels, **kwargs)).to(dtype)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen, dtype=dtype))
    return m


def _sliced_input(B, c, H, W, dtype, seed=0):
    """A channel slice of an NCHW tensor (planes contiguous, batch stride 3 c H W), a leaf."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(B, 3 * c, H, W, generator=gen, dtype=dtype)[:, c:2 * c].requires_grad_()


def _assert_fused_equals_eager(m: nn.Module, x: torch.Tensor, tol: float, seed: int = 9) -> None:
    """Outputs, gradients (input and every parameter) and buffers of ``m(x)`` and of the
    eager expression on a copy of ``m``."""
    ref = copy.deepcopy(m)
    y, y_ref = m(x), eager(ref, x)
    torch.testing.assert_close(y, y_ref, rtol=tol, atol=tol)
    gen = torch.Generator().manual_seed(seed)
    dy = torch.randn(y.shape, generator=gen, dtype=y.dtype)
    got = torch.autograd.grad(y, [x, *m.parameters()], dy)
    want = torch.autograd.grad(y_ref, [x, *ref.parameters()], dy)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)
    for b, r in zip(m.buffers(), ref.buffers()):
        torch.testing.assert_close(b, r, rtol=tol, atol=tol)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("name", GATED)
def test_modules_equal_their_expression_in_float64(kernel, name, train):
    m = _module(name, 6, torch.float64).train(train)
    for step in range(2):  # twice: the second step normalises with updated running statistics in eval
        _assert_fused_equals_eager(m, _sliced_input(3, 6, 7, 9, torch.float64, seed=step), 1e-10)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 1, 5, 3), (1, 3, 1, 17), (2, 5, 11, 1), (4, 2, 33, 35),
                                   (0, 3, 4, 5)])
@pytest.mark.parametrize("name", GATED)
def test_odd_shapes(kernel, name, shape):
    B, c, H, W = shape
    m = _module(name, c, torch.float64)
    if B * H * W <= 1 and name in ("spatial_d1", "spatial_d2", "cbam"):
        m.eval()  # a training batch norm needs more than one value (nn.BatchNorm2d raises)
    _assert_fused_equals_eager(m, _sliced_input(B, c, H, W, torch.float64), 1e-10)


@pytest.mark.parametrize("kernel_size, dilation", [(1, 1), (5, 1), (5, 3), (7, 2)])
def test_other_kernel_sizes(kernel, kernel_size, dilation):
    for cls in (SpatialAttention, NormalizationAttention):
        m = _module(cls, 4, torch.float64, kernel_size=kernel_size, dilation=dilation)
        _assert_fused_equals_eager(m, _sliced_input(2, 4, 9, 10, torch.float64), 1e-10)


@pytest.mark.parametrize("name", GATED)
def test_float32_at_the_cells_first_stage(kernel, name):
    m = _module(name, 4, torch.float32)
    _assert_fused_equals_eager(m, _sliced_input(8, 4, 32, 32, torch.float32), 1e-4)


@pytest.mark.parametrize("name", ["channel_v2", "spatial_d1", "norm_d2", "cbam"])
def test_one_and_two_threads_agree(kernel, name):
    m = _module(name, 5, torch.float64)
    x = _sliced_input(5, 5, 6, 13, torch.float64)
    threads = torch.get_num_threads()
    outputs = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            mn = copy.deepcopy(m)
            y = mn(x)
            outputs.append([y, *torch.autograd.grad(y.square().sum(), [x, *mn.parameters()])])
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*outputs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", GATED)
def test_layouts(kernel, name):
    """Channels-last in, channels-last out; any other layout is made contiguous."""
    m = _module(name, 4, torch.float64)
    base = torch.randn(3, 4, 6, 5, dtype=torch.float64)
    x = base.contiguous(memory_format=torch.channels_last).requires_grad_()
    y = m(x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    _assert_fused_equals_eager(m, x, 1e-10)
    x = base.transpose(2, 3).requires_grad_()  # planes not contiguous
    assert m(x).is_contiguous()
    _assert_fused_equals_eager(m, x, 1e-10)
    assert m(_sliced_input(3, 4, 6, 5, torch.float64)).is_contiguous()


def _first_max(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``x.amax(dim)`` whose gradient goes to the first maximal element (``argmax``'s)."""
    return x.gather(dim, x.argmax(dim, keepdim=True)).squeeze(dim)


def test_maxima_route_their_gradient_to_the_first_maximal_element(kernel):
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(-1, 2, (2, 4, 3, 5), generator=gen).double().requires_grad_()  # many ties
    cbam = _module(CBAM, 4, torch.float64)
    ch, sp = cbam.channel, cbam.spatial

    def reference(x):
        flat = x.flatten(2)
        mlp = lambda v: ch.fc2(torch.relu(ch.fc1(v)))  # noqa: E731
        y = x * torch.sigmoid(mlp(flat.mean(2)) + mlp(_first_max(flat, 2)))[:, :, None, None]
        pooled = torch.stack((y.mean(1), _first_max(y, 1)), 1)
        z = nn.functional.conv2d(pooled, sp.conv.weight, padding=3)
        return y * torch.sigmoid(sp.bn(z))

    ref = copy.deepcopy(cbam)
    with torch.no_grad():
        ch.fc1.weight.abs_()  # a positive MLP: the max branch carries gradient
        ref.load_state_dict(cbam.state_dict())
    y = cbam(x)
    ch, sp = ref.channel, ref.spatial
    y_ref = reference(x)
    torch.testing.assert_close(y, y_ref, rtol=1e-10, atol=1e-10)
    for g, w in zip(torch.autograd.grad(y.sum(), [x, *cbam.parameters()]),
                    torch.autograd.grad(y_ref.sum(), [x, *ref.parameters()])):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("momentum, track", [(None, True), (0.3, True), (0.1, False)])
def test_batch_norm_variants(kernel, momentum, track):
    m = _module(SpatialAttention, 3, torch.float64, kernel_size=7)
    m.bn = nn.BatchNorm2d(1, momentum=momentum, track_running_stats=track).double()
    for train in (True, True, False):
        m.train(train)
        _assert_fused_equals_eager(m, _sliced_input(2, 3, 5, 6, torch.float64), 1e-10)


def test_gradcheck(kernel):
    x = _sliced_input(2, 3, 5, 4, torch.float64)
    norm, spatial, channel = (_module(cls, 3, torch.float64) for cls in (NormalizationAttention, SpatialAttention,
                                                                          ChannelAttentionV2))
    conv = norm.conv
    assert torch.autograd.gradcheck(lambda x, w, b: attention_gates.normalization_attention(x, w, b, 1),
                                    (x, conv.weight, conv.bias))
    eps = spatial.bn.eps

    def batch_norm(g, b):  # batch statistics, no running statistics (the kernel's mode 0)
        return SimpleNamespace(weight=g, bias=b, eps=eps, training=True, track_running_stats=False,
                               running_mean=None, running_var=None)

    assert torch.autograd.gradcheck(
        lambda x, w, g, b: attention_gates.gate_function(attention_gates.SpatialGate(w, batch_norm(g, b), 1), x),
        (x, spatial.conv.weight, spatial.bn.weight, spatial.bn.bias))
    assert torch.autograd.gradcheck(  # CBAM: the channel MLP first
        lambda x, w1, w2, w, g, b: attention_gates.gate_function(
            attention_gates.SpatialGate(w, batch_norm(g, b), 2, (w1, w2)), x),
        (x, channel.fc1.weight, channel.fc2.weight, spatial.conv.weight, spatial.bn.weight, spatial.bn.bias))
    for with_max in (False, True):
        assert torch.autograd.gradcheck(lambda x, a, b: attention_gates.channel_attention(x, a, b, with_max),
                                        (x, channel.fc1.weight, channel.fc2.weight))


def test_no_input_gradient_wanted(kernel):
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64)
    for name in GATED:
        m = _module(name, 4, torch.float64)
        ref = copy.deepcopy(m)
        for g, w in zip(torch.autograd.grad(m(x).sum(), list(m.parameters())),
                        torch.autograd.grad(eager(ref, x).sum(), list(ref.parameters()))):
            torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-10)


def test_without_the_kernels_the_eager_path_runs(monkeypatch):
    monkeypatch.setattr(kernel_module, "LIBRARY", fresh_library(kernel_module))
    monkeypatch.setenv("ATTNAS_NO_KERNELS", "1")
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64)
    assert not attention_gates.kernels_apply(x)
    called = []
    monkeypatch.setattr(attention_gates._Gate, "apply", lambda *a: called.append(a))
    for name in GATED:
        m = _module(name, 4, torch.float64)
        torch.testing.assert_close(m(x), eager(copy.deepcopy(m), x))
    assert not called
    assert "ATTNAS_NO_KERNELS" in kernel_module.LIBRARY.unavailable_reason()


def test_other_dtypes_run_the_expression(kernel):
    x = torch.randn(2, 4, 5, 5, dtype=torch.bfloat16)
    assert not attention_gates.kernels_apply(x)
    assert attention_gates.kernels_apply(x.double())
    assert not attention_gates.kernels_apply(x.double(), torch.zeros(1))  # parameters of another dtype
    m = ChannelAttention(4).to(torch.bfloat16)
    torch.testing.assert_close(m(x), eager(m, x))


@pytest.mark.parametrize("train", [True, False])
def test_each_module_is_one_kernel_call_each_way(kernel, monkeypatch, train):
    calls = []
    real = attention_gates._call
    monkeypatch.setattr(attention_gates, "_call", lambda name, *a: (calls.append(name), real(name, *a)))
    x = _sliced_input(2, 4, 5, 6, torch.float64)
    for name in GATED:
        calls.clear()
        m = _module(name, 4, torch.float64).train(train)
        m(x).sum().backward()
        assert len(calls) == 2 and calls[0].endswith("_forward") and calls[1].endswith("_backward"), (name, calls)


def test_double_backward_raises_instead_of_being_wrong(kernel):
    x = _sliced_input(2, 4, 5, 5, torch.float64)
    for name in GATED:
        m = _module(name, 4, torch.float64)
        (gx,) = torch.autograd.grad(m(x).square().sum(), x, create_graph=True)
        with pytest.raises(RuntimeError):
            gx.sum().backward()
