"""Scaled cosine attention as a candidate mechanism of the ``mechanism`` pool."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnas import register_op
from attnas.ops.attention_mechanisms.base import AttentionBlock, masked_fill_keys


@register_op("mechanism", "cosine")
class CosineAttention(AttentionBlock):
    r"""Multi-head scaled cosine attention (Liu et al., "Swin Transformer V2", CVPR 2022, Eq. 2).

    Each head scores a query against a key by their cosine similarity divided by a learned
    temperature (without Swin's relative position bias):

    .. math::
        \mathrm{Sim}(q_i, k_j) = \frac{\cos(q_i, k_j)}{\tau}, \qquad
        \mathrm{Attention}(Q, K, V) = \mathrm{softmax}_j(\mathrm{Sim}) V,

    with one ``tau`` per head, kept above 0.01, and padded keys left out of the softmax.

    Args:
        dim: Model dimension ``D``.
        heads: Number of heads ``H``.
        head_dim: Per-head dimension (default ``dim // heads``).
        max_len: Unused (the block accepts any length).
        tau: Initial temperature of every head.

    Shapes:
        - **input:** ``x`` ``[B, L, D]``, ``mask`` ``[B, L]`` bool.
        - **output:** ``[B, L, D]``.
    """

    mechanism = "cosine"
    memory_growth = "L^2"

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024, tau: float = 0.1):
        super().__init__(dim, heads, head_dim, max_len)
        self.log_tau = nn.Parameter(torch.full((self.heads, 1, 1), math.log(tau)))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Cosine scores over the real keys, softmax, weighted sum of the values (``[B, H, L, d_h]``)."""
        tau = self.log_tau.exp().clamp(min=0.01)
        scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-1, -2) / tau
        scores = masked_fill_keys(scores, mask[:, None, None, :])
        return scores.softmax(dim=-1) @ v
