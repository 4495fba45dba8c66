"""Kernel ``edge_logits``: D-VAE's edge MLP over every candidate edge, as one fused autograd function. Pure PyTorch.

Chatzianastasis et al., 2021, Sec. 3.2.2 (D-VAE, Zhang et al. 2019, Sec. 3.3): the edge ``u_k -> u_t`` is
added with probability ``sigmoid(f_add_edge(Cat(h_{u_k}, h_{u_t})))``, ``f_add_edge`` a
Linear(2H, 4H) - ReLU - Linear(4H, 1) MLP. Its first layer splits into a source part
``W_s h_k`` (one row per source vertex) and a target part ``W_d h_t + b`` (one row per
distinct teacher-forced state), see :class:`~attnas.graphvae.decoder.EdgeScorer`. The
logit of candidate edge ``e`` is::

    logit_e = w_2 . relu(src[i_e] + dst[j_e]) + b_2

With autograd, the gathers, the sum, the ReLU and the second layer each write (and keep
for the backward) an ``(E, 4H)`` tensor for the ``E`` candidate edges, and the backward
writes four more. :func:`edge_logits` computes the same values block by block (blocks of
128 edges) and keeps nothing of size ``(E, 4H)``: its backward recomputes each block's
pre-activation and scatters ``g_e * w_2 * [pre > 0]`` into the source and target rows.
Overrides the hook ``edge_logits`` (:func:`attnas.graphvae.step_products.edge_logits`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnas.ops import overrides

_BLOCK = 128  # edges per block: a (128, 4H) pre-activation at a time


def _pre(src: Tensor, dst: Tensor, src_idx: Tensor, dst_idx: Tensor) -> Tensor:
    pre = dst.index_select(0, dst_idx)
    return pre.add_(src.index_select(0, src_idx))


class _EdgeLogits(torch.autograd.Function):
    @staticmethod
    def forward(ctx, src: Tensor, dst: Tensor, src_idx: Tensor, dst_idx: Tensor, w2: Tensor, b2: Tensor) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(src, dst, src_idx, dst_idx, w2)
        out = torch.empty(src_idx.shape[0], dtype=src.dtype, device=src.device)
        for lo in range(0, src_idx.shape[0], _BLOCK):
            hi = lo + _BLOCK
            pre = _pre(src, dst, src_idx[lo:hi], dst_idx[lo:hi]).clamp_min_(0)
            torch.mv(pre, w2, out=out[lo:hi])
        return out.add_(b2)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        src, dst, src_idx, dst_idx, w2 = ctx.saved_tensors
        grad = grad.contiguous()
        need_src, need_dst, _, _, need_w2, need_b2 = ctx.needs_input_grad
        g_src = torch.zeros_like(src) if need_src else None
        g_dst = torch.zeros_like(dst) if need_dst else None
        g_w2 = torch.zeros_like(w2) if need_w2 else None
        for lo in range(0, src_idx.shape[0], _BLOCK):
            hi = lo + _BLOCK
            si, di, g = src_idx[lo:hi], dst_idx[lo:hi], grad[lo:hi]
            pre = _pre(src, dst, si, di)
            g_pre = torch.ops.aten.threshold_backward(torch.outer(g, w2), pre, 0)  # g_e * w_2 * [pre > 0]
            if need_w2:
                g_w2.addmv_(pre.clamp_min_(0).t(), g)
            if need_src:
                g_src.index_add_(0, si, g_pre)
            if need_dst:
                g_dst.index_add_(0, di, g_pre)
        g_b2 = grad.sum().reshape(1) if need_b2 else None
        return g_src, g_dst, None, None, g_w2, g_b2


def edge_logits(src: Tensor, dst: Tensor, src_idx: Tensor, dst_idx: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """Override of :func:`attnas.graphvae.step_products.edge_logits`: the same values without any
    ``(E, 4H)`` tensor kept for the backward. Not under autocast, with operands of different
    dtypes or with a second layer of several outputs (the readable path runs)."""
    kind = src.device.type
    if (torch.is_autocast_enabled(kind) or weight.shape[0] != 1
            or len({src.dtype, dst.dtype, weight.dtype, bias.dtype}) != 1):
        return NotImplemented
    return _EdgeLogits.apply(src, dst, src_idx, dst_idx, weight.squeeze(0), bias)


overrides.register("edge_logits", "edge_logits", edge_logits)
