"""Kernel ``shared_linear``: a linear map applied at many sequential steps, with one weight-gradient product. Pure PyTorch.

The D-VAE encoder and decoder (Chatzianastasis et al., 2021, Appendix A, Eqs. 4-11; D-VAE, Zhang et al.
2019, Sec. 3) apply the same GRU hidden-state product ``W_hh h`` and the same gated-sum
product ``[W_g; W_m] Cat(h, x)`` once per vertex, in a sequence: each step needs the
previous step's output, so every product has only ``B`` (the batch size) rows. Autograd
would compute the weight gradient once per step, ``g_t^T x_t``, a rank-``B`` product that
writes the whole ``(out, in)`` gradient, and add it to the previous ones.

:class:`SharedLinear` returns the same outputs and the same gradients: the input
gradient of every step is computed at that step, as usual, but the weight (and bias)
gradient is the single product ``G^T X`` over all steps' stacked output gradients ``G``
and inputs ``X``, computed once after the last step's backward. Only the summation order
of the weight gradient changes (floating-point rounding).

How: a collector node ``token = Collect(weight, bias)`` is created once; every step is
``Step(x, weight, bias, token)``. A step's backward returns the input gradient, stores
``(x, g)`` in a shared bank and returns a zero gradient for ``token``; autograd runs the
collector's backward after all of its consumers (every step), and that backward turns the
bank into the weight and bias gradients.

Overrides the hook ``step_linear`` (:func:`attnas.graphvae.step_products.step_linear`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attnas.ops import overrides


class _Bank:
    """The inputs and output gradients of every step of one forward pass."""

    def __init__(self) -> None:
        self.inputs: list[Tensor] = []
        self.grads: list[Tensor] = []


class _Collect(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight: Tensor, bias: Tensor | None, bank: _Bank) -> Tensor:  # type: ignore[override]
        ctx.bank = bank
        ctx.has_bias = bias is not None
        ctx.dtype = weight.dtype
        return weight.new_zeros(())

    @staticmethod
    def backward(ctx, _grad: Tensor):  # type: ignore[override]
        bank: _Bank = ctx.bank
        if not bank.grads:
            return None, None, None
        rows = bank.grads[0].dim() - 2  # 0: (R, out); 1: stacked maps (D, R, out)
        g = torch.cat(bank.grads, rows)
        x = torch.cat(bank.inputs, rows)
        bank.inputs, bank.grads = [], []  # a second backward (retain_graph) refills the bank
        if rows == 0:
            grad_w = g.t().mm(x)
        else:  # one product per map, written into the stacked gradient
            grad_w = g.new_empty(g.shape[0], g.shape[2], x.shape[2])
            for d in range(g.shape[0]):
                torch.mm(g[d].t(), x[d], out=grad_w[d])
        grad_b = g.sum(rows, dtype=ctx.dtype) if ctx.has_bias else None
        return grad_w.to(ctx.dtype), grad_b, None


class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, token: Tensor, bank: _Bank) -> Tensor:  # type: ignore[override]
        ctx.x_dtype = x.dtype
        kind = x.device.type
        ctx.token_dtype = token.dtype
        if torch.is_autocast_enabled(kind):  # compute as autocast would, and keep the cast operands
            dt = torch.get_autocast_dtype(kind)
            x, weight = x.to(dt), weight.to(dt)  # no copy: SharedLinear casts the weight once
            bias = None if bias is None else bias.to(dt)
        ctx.save_for_backward(x, weight)
        ctx.bank = bank
        if weight.dim() == 2:
            return F.linear(x, weight, bias).to(ctx.x_dtype)
        out = torch.bmm(x, weight.transpose(1, 2))
        return (out if bias is None else out + bias.unsqueeze(1)).to(ctx.x_dtype)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        x, weight = ctx.saved_tensors
        grad = grad.to(x.dtype)
        ctx.bank.inputs.append(x)
        ctx.bank.grads.append(grad)
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_x = (grad.mm(weight) if weight.dim() == 2 else torch.bmm(grad, weight)).to(ctx.x_dtype)
        return grad_x, None, None, grad.new_zeros((), dtype=ctx.token_dtype), None


class SharedLinear:
    """``F.linear(x, weight, bias)`` for many steps of one forward pass (see the module doc).

    Create one per forward pass (it holds that pass's bank), after the weights are final.
    Without gradients (``torch.no_grad`` or a frozen weight) it is plain ``F.linear``.

    A stack of ``D`` maps (weight ``(D, out, in)``, bias ``(D, out)``) applies map ``d`` to
    ``x[d]`` in one batched product, e.g. the two directions of the bidirectional encoder;
    its weight gradient is one product ``G_d^T X_d`` per map, written into the stacked
    gradient.

    Args:
        weight: ``(out, in)`` weight, or ``(D, out, in)`` stacked weights.
        bias: ``(out,)`` or ``(D, out)`` bias, or None.

    Shapes:
        - **x**: ``(R, in)``, or ``(D, R, in)`` for stacked weights
        - **output**: ``(R, out)`` or ``(D, R, out)``

    Under CPU autocast (bf16) the step product, the input gradient and the weight-gradient
    product run in the autocast dtype, as autocast would run ``F.linear``; unlike
    autocast, the output is returned in the input's dtype (the recurrent state stays
    fp32 between steps), and the gradients in the parameters' dtype.

    Note:
        The weight gradient of a step exists only after the whole backward pass, so
        ``torch.autograd.grad`` of a single step's output is not supported (only the input
        gradient is then exact); a full ``backward()`` is.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None = None):
        self.weight = weight
        self.bias = bias
        self.tracked = torch.is_grad_enabled() and (
            weight.requires_grad or (bias is not None and bias.requires_grad)
        )
        if self.tracked:
            self.bank = _Bank()
            self.token = _Collect.apply(weight, bias, self.bank)
            kind = weight.device.type
            if torch.is_autocast_enabled(kind):  # cast once for all steps (autocast would cast per step)
                dt = torch.get_autocast_dtype(kind)
                self.weight = weight.detach().to(dt)
                self.bias = None if bias is None else bias.detach().to(dt)

    def __call__(self, x: Tensor) -> Tensor:
        if x.dim() != self.weight.dim():
            raise ValueError(f"SharedLinear with a {self.weight.dim()}-d weight takes "
                             f"{'(rows, features)' if self.weight.dim() == 2 else '(maps, rows, features)'} "
                             f"inputs, got shape {tuple(x.shape)}")
        if not self.tracked or not torch.is_grad_enabled():
            if self.weight.dim() == 2:
                return F.linear(x, self.weight, self.bias)
            out = torch.bmm(x, self.weight.transpose(1, 2))
            return out if self.bias is None else out + self.bias.unsqueeze(1)
        return _Step.apply(x, self.weight, self.bias, self.token, self.bank)


def step_linear(weight: Tensor, bias: Tensor | None = None) -> SharedLinear:
    """Override of :func:`attnas.graphvae.step_products.step_linear`."""
    return SharedLinear(weight, bias)


overrides.register("step_linear", "shared_linear", step_linear)
