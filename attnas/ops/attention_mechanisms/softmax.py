"""Full softmax (scaled dot-product) attention block."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnas.registry import register_op
from attnas.ops.attention_mechanisms.base import AttentionBlock


@register_op("mechanism", "softmax")
class SoftmaxAttention(AttentionBlock):
    r"""Multi-head scaled dot-product attention (Vaswani et al. 2017, "Attention Is All You Need").

    Each head computes (Eq. 1)

    .. math::
        \mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_h}}\right) V,

    with padded keys excluded from the softmax, through
    :func:`torch.nn.functional.scaled_dot_product_attention` (which uses a fused,
    memory-efficient kernel where one exists, so the ``L x L`` matrix need not be stored;
    the time is still quadratic in ``L``).

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` is unused here (the block accepts any length).
    """

    mechanism = "softmax"
    memory_growth = "L^2"

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024):
        super().__init__(dim, heads, head_dim, max_len)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
