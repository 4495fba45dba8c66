"""Kernel grouped_mixed_op (PyTorch): all edges of a GroupedMixedOp together against the readable
edge-by-edge, operation-by-operation sum (AutoLA Eq. 13)."""

from __future__ import annotations

import pytest
import torch
from compiled_kernels import kernel_enabled, kernels_off

import attnas.kernels
from attnas.ops import overrides
from attnas.ops.autola.attention_modules import HOGA_OPS
from attnas.ops.autola.hoga_relaxed import GroupedMixedOp


def _perturbed(module: GroupedMixedOp) -> GroupedMixedOp:
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in module.parameters():  # off the initial values (BN weights 1, biases 0)
            p.add_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module


def _run(m: GroupedMixedOp, x: torch.Tensor, w: torch.Tensor, readable: bool):
    """Output, gradients of the input, the weights and every parameter, and the running statistics."""
    m.zero_grad(set_to_none=True)
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    state = {k: v.clone() for k, v in m.state_dict().items()}
    if readable:
        with kernels_off():
            y = m(x, w)
    else:
        y = m(x, w)
    y.mul(torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y)).sum().backward()
    out = [y.detach(), x.grad, w.grad, *(p.grad for p in m.parameters()), *m.state_dict().values()]
    m.load_state_dict(state)  # both runs start from the same running statistics
    return out


@pytest.mark.parametrize("compiled", [False, True])  # the PyTorch kernel alone, and with hoga_gates / small_conv
@pytest.mark.parametrize("shared, G", [(False, 3), (True, 2)])
def test_grouped_equals_the_readable_sum_values_gradients_and_running_stats(compiled, shared, G):
    kernel_enabled("grouped_mixed_op")
    assert overrides.active("grouped_mixed_op")
    m = _perturbed(GroupedMixedOp(G, 4, HOGA_OPS, shared_input=shared).double()).train()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, (1 if shared else G) * 4, 6, 5, dtype=torch.float64, generator=gen)
    w = torch.randn(G, len(HOGA_OPS), dtype=torch.float64, generator=gen).softmax(-1)
    readable = _run(m, x, w, readable=True)
    if compiled:
        grouped = _run(m, x, w, readable=False)
    else:
        with attnas.kernels.switched_off("hoga_gates", "small_conv"):
            grouped = _run(m, x, w, readable=False)
    assert len(readable) == len(grouped)
    for a, b in zip(grouped, readable):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
