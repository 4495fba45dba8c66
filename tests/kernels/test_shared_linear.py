"""Kernel shared_linear (PyTorch): SharedLinear gives the gradients of plain F.linear, with one weight-gradient product."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnas.kernels.shared_linear import SharedLinear


def _recurrence(linear, mix, h0, steps=5):
    """A small recurrent chain: every step feeds the previous output through the map."""
    h, outs = h0, []
    for _ in range(steps):
        h = torch.tanh(linear(h)) @ mix
        outs.append(h)
    return torch.stack(outs).pow(2).sum()


@pytest.mark.parametrize("bias", [True, False])
def test_gradients_equal_plain_linear(bias):
    torch.manual_seed(0)
    w = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True) if bias else None
    mix = torch.randn(6, 4, dtype=torch.float64)
    h0 = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    loss = _recurrence(SharedLinear(w, b), mix, h0)
    grads = torch.autograd.grad(loss, [h0, w] + ([b] if bias else []))
    ref_loss = _recurrence(lambda x: F.linear(x, w, b), mix, h0)
    ref = torch.autograd.grad(ref_loss, [h0, w] + ([b] if bias else []))
    assert torch.allclose(loss, ref_loss, atol=0)
    for g, r in zip(grads, ref):
        assert torch.allclose(g, r, atol=1e-12)


def test_weight_gradient_accumulates_with_other_uses_and_backward_twice():
    torch.manual_seed(0)
    w = torch.randn(5, 5, dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 5, dtype=torch.float64)

    def loss_of(lin):
        return (_recurrence(lin, torch.eye(5, dtype=torch.float64), x, steps=3) + F.linear(x, w).sum())

    lin = SharedLinear(w)
    loss = loss_of(lin)
    loss.backward(retain_graph=True)
    once = w.grad.clone()
    loss.backward()  # the bank is refilled by the second pass
    w.grad = None
    loss_of(lambda v: F.linear(v, w)).backward()
    assert torch.allclose(once, w.grad, atol=1e-12)


def test_without_gradients_it_is_plain_linear():
    w, b = torch.randn(3, 2), torch.randn(3)
    x = torch.randn(4, 2)
    assert SharedLinear(w, b).tracked is False
    with torch.no_grad():
        lin = SharedLinear(w.requires_grad_(), b)
        assert torch.equal(lin(x), F.linear(x, w, b))


def test_rejects_inputs_that_are_not_matrices():
    lin = SharedLinear(torch.randn(3, 2, requires_grad=True))
    with pytest.raises(ValueError, match="rows, features"):
        lin(torch.randn(1, 4, 2))


def test_bf16_autocast_runs_in_bf16_and_returns_fp32_gradients():
    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    b = torch.randn(8, requires_grad=True)
    x = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lin = SharedLinear(w, b)
        out = lin(x)
        assert out.dtype == torch.float32  # the product ran in bf16, the state stays fp32
        expected = F.linear(x.bfloat16(), w.bfloat16(), b.bfloat16()).float()
        assert torch.equal(out, expected)
        loss = _recurrence(lin, torch.eye(8), x, steps=2)
    loss.float().backward()
    assert w.grad.dtype == torch.float32 and b.grad.dtype == torch.float32
    w2 = w.detach().clone().requires_grad_()
    b2 = b.detach().clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = _recurrence(lambda v: F.linear(v, w2, b2), torch.eye(8), x, steps=2)
    ref.float().backward()
    assert torch.allclose(w.grad, w2.grad, rtol=0.05, atol=0.05 * float(w2.grad.abs().max()))


def test_stacked_maps_equal_separate_plain_linears():
    torch.manual_seed(0)
    w = torch.randn(2, 6, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    mix = torch.randn(6, 4, dtype=torch.float64)
    h0 = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    loss = _recurrence(SharedLinear(w, b), mix, h0)
    grads = torch.autograd.grad(loss, [h0, w, b])

    def separate(x):
        return torch.stack([F.linear(x[d], w[d], b[d]) for d in range(2)])

    ref = torch.autograd.grad(_recurrence(separate, mix, h0), [h0, w, b])
    for g, r in zip(grads, ref):
        assert torch.allclose(g, r, atol=1e-12)
    with torch.no_grad():
        assert torch.allclose(SharedLinear(w, b)(h0), separate(h0), atol=1e-12)
