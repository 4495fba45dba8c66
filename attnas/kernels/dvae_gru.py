"""Kernel ``dvae_gru``: the GRU products and cell step of D-VAE's vertex update with
hand-written backward passes. Pure PyTorch.

D-VAE (Zhang et al., NeurIPS 2019, Sec. 3.1; Chatzianastasis et al., 2021, Eqs. 7 / 11)
updates every vertex with a GRU cell. Overrides two hooks of :mod:`attnas.graphvae.gru`:

- ``gru_input_products`` (:func:`~attnas.graphvae.gru.input_products`, ``F.linear``): the
  backward forms the weight gradient as ``(X^T G)^T`` (an ``(in, R) x (R, 3H)`` product, then
  transposed) instead of autograd's ``G^T X``; values agree up to rounding.
- ``gru_step`` (:func:`~attnas.graphvae.gru.gru_step`): one autograd function whose backward
  writes the gradients of ``gi`` and ``gh`` directly as ``(R, 3H)`` tensors (no per-gate split
  and concatenation) in a few element-wise passes.

Neither applies under autocast or with operands of different dtypes (the readable path runs).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attnas.ops import overrides


class _InputProducts(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        x, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])
        grad_x = grad.matmul(weight) if ctx.needs_input_grad[0] else None
        grad_w = x.reshape(-1, x.shape[-1]).t().mm(g).t().contiguous() if ctx.needs_input_grad[1] else None
        grad_b = g.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


class _GruCell(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:  # type: ignore[override]
        i_r, i_z, i_n = gi.chunk(3, -1)
        h_r, h_z, h_n = gh.chunk(3, -1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(torch.addcmul(i_n, r, h_n))
        ctx.save_for_backward(r, z, n, h_n, h)
        return torch.addcmul(n, z, h - n)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        r, z, n, h_n, h = ctx.saved_tensors
        grad_gi = torch.empty(*grad.shape[:-1], 3 * grad.shape[-1], dtype=grad.dtype, device=grad.device)
        g_r, g_z, g_n = grad_gi.chunk(3, -1)
        torch.mul(grad, (1 - z) * (1 - n * n), out=g_n)  # through n = tanh(.)
        torch.mul(grad * (h - n), z * (1 - z), out=g_z)  # through z = sigma(.)
        torch.mul(g_n * h_n, r * (1 - r), out=g_r)  # through r = sigma(.), inside n
        grad_gh = grad_gi.clone()
        grad_gh.chunk(3, -1)[2].mul_(r)
        return grad_gi, grad_gh, grad * z


def input_products(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """Override of :func:`attnas.graphvae.gru.input_products`."""
    if torch.is_autocast_enabled(x.device.type) or x.dtype != weight.dtype:
        return NotImplemented
    return _InputProducts.apply(x, weight, bias)


def gru_step(gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    """Override of :func:`attnas.graphvae.gru.gru_step`."""
    if torch.is_autocast_enabled(gi.device.type) or len({gi.dtype, gh.dtype, h.dtype}) != 1:
        return NotImplemented
    return _GruCell.apply(gi, gh, h)


overrides.register("gru_input_products", "dvae_gru", input_products)
overrides.register("gru_step", "dvae_gru", gru_step)
