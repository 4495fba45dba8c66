"""Linformer attention block (low-rank projections along the sequence axis)."""

from __future__ import annotations

import torch
from torch import nn

from attnas.core.errors import ConfigError
from attnas.ops.attention_mechanisms.base import AttentionBlock
from attnas.registry import register_op


@register_op("mechanism", "linformer")
class LinformerAttention(AttentionBlock):
    r"""Linformer attention (Wang et al. 2020, "Linformer: Self-Attention with Linear Complexity").

    Keys and values are projected along the *sequence* axis to ``k`` rows by
    :math:`E, F \in \mathbb{R}^{k \times n}` before attention (Eq. 7):

    .. math::
        \mathrm{head} = \mathrm{softmax}\!\left(\frac{Q (E K)^\top}{\sqrt{d_h}}\right) F V,

    costing :math:`O(L k)` time and memory. ``n = max_len`` is fixed at construction; a
    shorter sequence uses the first ``L`` columns of ``E`` and ``F``. Padded keys and
    values are zeroed before the projection, so appending padding does not change the
    projected keys and values (and hence the outputs at real positions). ``E`` and ``F``
    are shared by the heads (the paper's headwise sharing, Sec. 4) and ``share_kv`` makes
    ``E = F`` (key-value sharing).

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` is ``n`` (inputs need ``L <= max_len``).

    Args:
        k: Projected length ``k``.
        share_kv: Use one projection for keys and values.
    """

    mechanism = "linformer"
    memory_growth = "L"
    length_bound = True

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024, k: int = 64,
                 share_kv: bool = False):
        super().__init__(dim, heads, head_dim, max_len)
        if k < 1:
            raise ConfigError(f"{self._what()}: k must be >= 1, got {k}")
        self.k_proj_len = k
        std = max_len**-0.5  # lecun-normal over the sequence axis, as a Dense layer over it would be
        self.E = nn.Parameter(torch.randn(k, max_len) * std)
        self.F = None if share_kv else nn.Parameter(torch.randn(k, max_len) * std)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n = q.shape[2]
        keep = mask[:, None, :, None].to(k.dtype)
        e = self.E[:, :n].to(k.dtype)
        f = e if self.F is None else self.F[:, :n].to(k.dtype)
        kp = torch.einsum("kl,bhld->bhkd", e, k * keep)
        vp = torch.einsum("kl,bhld->bhkd", f, v * keep)
        probs = torch.softmax(torch.einsum("bhld,bhkd->bhlk", q, kp) * self.scale, dim=-1)
        return torch.einsum("bhlk,bhkd->bhld", probs, vp)
