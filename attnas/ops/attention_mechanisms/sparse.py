"""Sparse Transformer attention block (strided + local pattern)."""

from __future__ import annotations

import math

import torch

from attnas.core.errors import ConfigError
from attnas.ops.attention_mechanisms.base import NEG_INF, AttentionBlock
from attnas.ops.attention_mechanisms.blocked import pad_length
from attnas.registry import register_op


@register_op("mechanism", "sparse")
class SparseAttention(AttentionBlock):
    r"""Strided sparse attention (Child et al. 2019, "Generating Long Sequences with Sparse Transformers").

    The strided pattern with stride ``l`` factorises attention into two connectivity
    sets (Sec. 4.2), here in their bidirectional (encoder) form:

    * local: :math:`A^{(1)}_i = \{j : \lfloor j / l \rfloor = \lfloor i / l \rfloor\}`
      (the keys of the same length-``l`` block);
    * strided: :math:`A^{(2)}_i = \{j : (i - j) \bmod l = 0\}`.

    Each head attends to the union :math:`A^{(1)}_i \cup A^{(2)}_i` in one softmax (the
    "merged" head of Sec. 4.3), so every position reaches every other in two layers.
    Memory is :math:`O(L (l + L / l))`, i.e. :math:`O(L \sqrt L)` with
    :math:`l \approx \sqrt L`, the paper's choice; by default ``stride`` is
    :math:`\lceil \sqrt{\text{max\_len}} \rceil`.

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` sets the default stride only.

    Args:
        stride: Block length and stride ``l`` (default ``ceil(sqrt(max_len))``).
    """

    mechanism = "sparse"
    memory_growth = "L^1.5"

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024,
                 stride: int | None = None):
        super().__init__(dim, heads, head_dim, max_len)
        stride = stride if stride is not None else math.ceil(math.sqrt(max_len))
        if stride < 1:
            raise ConfigError(f"{self._what()}: stride must be >= 1, got {stride}")
        self.stride = stride

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        bsz, heads, n, d = q.shape
        s = self.stride
        nb = -(-n // s)  # ceil(n / s) in integers (a traced program can serialise it)
        lp = nb * s
        q, k, v = (pad_length(t, lp, 2).reshape(bsz, heads, nb, s, d) for t in (q, k, v))
        mb = pad_length(mask, lp, 1, False).view(bsz, 1, nb, s)
        # local: same block -> [B, H, nb, s(query), s(key)]
        local = torch.einsum("bhaid,bhajd->bhaij", q, k) * self.scale
        local = local.masked_fill(~mb[:, :, :, None, :], NEG_INF)
        # strided: same offset within the block, other blocks -> [B, H, nb, s(query), nb(key block)]
        strided = torch.einsum("bhaid,bhcid->bhaic", q, k) * self.scale
        key_ok = mb.permute(0, 1, 3, 2)[:, :, None]  # [B, 1, 1, s, nb]: is key (c, i) real
        other = ~torch.eye(nb, dtype=torch.bool, device=q.device)[None, None, :, None, :]  # self is in `local`
        strided = strided.masked_fill(~(key_ok & other), NEG_INF)
        probs = torch.softmax(torch.cat([local, strided], dim=-1), dim=-1)
        out = torch.einsum("bhaij,bhajd->bhaid", probs[..., :s], v)
        out = out + torch.einsum("bhaic,bhcid->bhaid", probs[..., s:], v)
        return out.reshape(bsz, heads, lp, d)[:, :, :n]
