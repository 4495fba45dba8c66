"""fast_dropout: bit for bit the straightforward inverted dropout on the same random numbers."""

from __future__ import annotations

import pytest
import torch

from attnas.ops.dropout import FastDropout, fast_dropout


def reference(x: torch.Tensor, p: float) -> torch.Tensor:
    return x * (torch.rand_like(x) >= p) * (1.0 / (1.0 - p))


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_equals_reference_bit_for_bit_forward_and_backward(p):
    x = torch.randn(6, 7, 5, requires_grad=True)
    g = torch.randn(6, 7, 5)
    outs = []
    for fn in (reference, lambda t, q: fast_dropout(t, q, True)):
        torch.manual_seed(3)
        y = fn(x, p)
        (grad,) = torch.autograd.grad(y, x, g)
        outs.append((y, grad))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    assert torch.equal(torch.signbit(outs[0][0]), torch.signbit(outs[1][0]))  # even the signs of zeros


def test_keep_rate_scale_and_eval_identity():
    torch.manual_seed(0)
    x = torch.ones(200_000)
    y = fast_dropout(x, 0.1, True)
    values = torch.unique(y)
    assert values.numel() == 2 and values[0] == 0 and values[1].item() == pytest.approx(1 / 0.9)
    assert abs((y > 0).float().mean().item() - 0.9) < 0.005
    assert fast_dropout(x, 0.1, False) is x and fast_dropout(x, 0.0, True) is x
    assert torch.all(fast_dropout(x, 1.0, True) == 0)
    m = FastDropout(0.3).eval()
    assert m(x) is x
