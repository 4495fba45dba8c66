"""A GRU cell step from a zero hidden state, without the hidden-state product.

The vertex update of D-VAE (Zhang et al. 2019, Sec. 3.1; Chatzianastasis et al., 2021, Eqs. 7 / 11) is a
GRU cell. ``nn.GRUCell`` (Cho et al. 2014) computes ``r = sigma(W_ir x + b_ir + W_hr h + b_hr)``,
``z = sigma(W_iz x + b_iz + W_hz h + b_hz)``, ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``
and ``h' = (1 - z) * n + z * h``. With ``h = 0`` every ``W_h* h`` product vanishes, so
``h' = (1 - z) * tanh(W_in x + b_in + r * b_hn)``. In D-VAE a vertex without (or before
any) predecessor starts from ``h = 0``; its state then depends on its type alone, so it
can be computed once per vertex type and gathered.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def gru_from_zero(cell: nn.GRUCell, x: Tensor) -> Tensor:
    """``cell(x, 0)`` computed without multiplying the (zero) hidden state.

    Args:
        cell: The GRU cell.
        x: Inputs.

    Shapes:
        - **x**: ``(R, input_size)``
        - **output**: ``(R, hidden_size)``
    """
    gi = F.linear(x, cell.weight_ih, cell.bias_ih)
    i_r, i_z, i_n = gi.chunk(3, -1)
    if cell.bias_hh is not None:
        b_r, b_z, b_n = cell.bias_hh.chunk(3)
    else:
        b_r = b_z = b_n = torch.zeros((), dtype=x.dtype, device=x.device)
    r = torch.sigmoid(i_r + b_r)
    z = torch.sigmoid(i_z + b_z)
    n = torch.tanh(i_n + r * b_n)
    return (1 - z) * n


def gru_cell(gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    """A GRU cell step from its two precomputed products, as ``nn.GRUCell`` computes it.

    ``gi = W_ih x + b_ih`` and ``gh = W_hh h + b_hh`` (gates in PyTorch's order r, z, n)::

        r = sigma(gi_r + gh_r);  z = sigma(gi_z + gh_z);  n = tanh(gi_n + r * gh_n)
        h' = (1 - z) * n + z * h

    Splitting the products out lets a caller compute ``W_ih x`` for every vertex at once
    (the inputs are known in advance) and ``W_hh h`` with
    :class:`~attnas.graphvae.shared_linear.SharedLinear`.

    Args:
        gi: Input product.
        gh: Hidden-state product.
        h: Hidden state.

    Shapes:
        - **gi**, **gh**: ``(R, 3H)``
        - **h**: ``(R, H)``
        - **output**: ``(R, H)``
    """
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (h - n)


def input_products(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``F.linear(x, weight, bias)`` for the GRU input products of every vertex at once.

    The same product, with a backward that forms the weight gradient as ``(X^T G)^T``
    (an ``(in, R) x (R, 3H)`` product, then transposed) instead of autograd's ``G^T X``
    (``(3H, R) x (R, in)``); the values agree up to rounding. Under autocast, or when ``x``
    and ``weight`` have different dtypes, it is plain ``F.linear``.

    Args:
        x: Inputs of every vertex.
        weight: The GRU's input weight ``W_ih``.
        bias: Its bias ``b_ih``, or None.

    Shapes:
        - **x**: ``(*, in)``; **weight**: ``(out, in)``; **bias**: ``(out,)``
        - **output**: ``(*, out)``
    """
    kind = x.device.type
    if torch.is_autocast_enabled(kind) or x.dtype != weight.dtype:
        return F.linear(x, weight, bias)
    return _InputProducts.apply(x, weight, bias)


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


def fused_gru_cell(gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    """:func:`gru_cell` as one autograd function with a hand-written backward.

    Same formula and values; the backward writes the gradients of ``gi`` and ``gh`` directly
    as ``(R, 3H)`` tensors (no per-gate split and concatenation) in a few element-wise
    passes. Under autocast, or with operands of different dtypes, it is :func:`gru_cell`.

    Args:
        gi: Input product ``W_ih x + b_ih``.
        gh: Hidden-state product ``W_hh h + b_hh``.
        h: Hidden state.

    Shapes:
        - **gi**, **gh**: ``(*, 3H)``
        - **h**: ``(*, H)``
        - **output**: ``(*, H)``
    """
    if torch.is_autocast_enabled(gi.device.type) or len({gi.dtype, gh.dtype, h.dtype}) != 1:
        return gru_cell(gi, gh, h)
    return _GruCell.apply(gi, gh, h)
