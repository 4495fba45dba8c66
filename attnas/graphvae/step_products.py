"""Linear maps of D-VAE's sequential loops, written as their equations.

The D-VAE encoder and decoder (Zhang et al., NeurIPS 2019, Sec. 3; Chatzianastasis et al.,
2021, Appendix A, Eqs. 4-11) apply the same GRU hidden-state product ``W_hh h`` and the same
gated-sum product ``[W_g; W_m] Cat(h, x)`` once per vertex, and score every candidate edge
with the second layer of the edge MLP ``f_add_edge``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor


def step_linear(weight: Tensor, bias: Tensor | None = None) -> Callable[[Tensor], Tensor]:
    """The map ``x -> x W^T + b`` with these weights, for the steps of one forward pass.

    Args:
        weight: ``(out, in)`` weight.
        bias: ``(out,)`` bias, or None.
    """
    return functools.partial(F.linear, weight=weight, bias=bias)


def edge_logits(src: Tensor, dst: Tensor, src_idx: Tensor, dst_idx: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """Logits ``weight . relu(src[src_idx] + dst[dst_idx]) + bias`` of every candidate edge.

    The edge ``u_k -> u_t`` is added with probability ``sigmoid(f_add_edge(Cat(h_k, h_t)))``;
    the first layer of ``f_add_edge`` splits into a source part ``src`` (one row per source
    vertex) and a target part ``dst`` (bias included, one row per teacher-forced state), see
    :class:`~attnas.graphvae.decoder.EdgeScorer`; this is the ReLU and the second layer.

    Args:
        src: First-layer source parts, one row per source vertex.
        dst: First-layer target parts (bias included), one row per target state.
        src_idx: Source row of every edge.
        dst_idx: Target row of every edge.
        weight: Second-layer weight, ``(1, 4H)``.
        bias: Second-layer bias, ``(1,)``.

    Shapes:
        - **src**: ``(S, 4H)``; **dst**: ``(R, 4H)``
        - **src_idx**, **dst_idx**: ``(E,)`` int64
        - **output**: ``(E,)``
    """
    return F.linear(torch.relu(src[src_idx] + dst[dst_idx]), weight, bias).squeeze(-1)
