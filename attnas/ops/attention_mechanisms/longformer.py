"""Longformer attention block (sliding window + global tokens)."""

from __future__ import annotations


import torch
from torch import nn

from attnas.core.errors import ConfigError
from attnas.ops.attention_mechanisms.base import AttentionBlock
from attnas.ops.attention_mechanisms.blocked import blocked_attention, full_rows
from attnas.registry import register_op


@register_op("mechanism", "longformer")
class LongformerAttention(AttentionBlock):
    r"""Longformer attention (Beltagy et al. 2020, "Longformer: The Long-Document Transformer").

    Combines (Sec. 3.1):

    * a sliding window: token ``i`` attends to the tokens ``j`` with
      :math:`|i - j| \le w/2`;
    * global attention on the first ``global_tokens`` positions (e.g. the ``[CLS]``
      token of a classifier): every token attends to them and they attend to every
      token. Global rows use their own projections :math:`Q_g, K_g, V_g` ("Linear
      Projections for Global Attention").

    The window is computed blockwise (blocks of ``w/2``; each query block gathers its own
    and both neighbouring blocks, then a band mask keeps :math:`|i-j| \le w/2`), so memory
    is :math:`O(L w)`; the global rows cost :math:`O(g L)`.

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` is unused here (the block accepts any length).

    Args:
        window: Window size ``w`` (``w/2`` tokens on each side).
        global_tokens: Number ``g`` of leading positions with global attention.
    """

    mechanism = "longformer"
    memory_growth = "L"

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024, window: int = 64,
                 global_tokens: int = 1):
        super().__init__(dim, heads, head_dim, max_len)
        if window < 2 or global_tokens < 0:
            raise ConfigError(f"{self._what()}: need window >= 2 and global_tokens >= 0, got {window}, {global_tokens}")
        self.window, self.global_tokens = window, global_tokens
        self.radius = window // 2
        if global_tokens:
            self.q_global = nn.Linear(dim, self.inner)
            self.k_global = nn.Linear(dim, self.inner)
            self.v_global = nn.Linear(dim, self.inner)

    def attend_heads(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = (self.split_heads(proj(x)) for proj in (self.q, self.k, self.v))
        n = q.shape[2]
        g = min(self.global_tokens, n)
        r = self.radius
        nb = -(-n // r)  # ceil(n / r) in integers (a traced program can serialise it)
        idx = (torch.arange(nb, device=x.device)[:, None] + torch.arange(-1, 2, device=x.device))[None]
        ok = (idx >= 0) & (idx < nb)

        def band(qpos: torch.Tensor, kpos: torch.Tensor) -> torch.Tensor:
            return ((qpos - kpos).abs() <= r) & (kpos >= g)  # global keys come in as extra keys

        extra = {}
        if g:
            extra = dict(extra_k=k[:, :, :g], extra_v=v[:, :, :g], extra_ok=mask[:, :g])
        out = blocked_attention(q, k, v, mask, r, idx, ok, self.scale, pair_ok=band, **extra)
        if g:
            qg = self.split_heads(self.q_global(x[:, :g]))
            kg, vg = (self.split_heads(proj(x)) for proj in (self.k_global, self.v_global))
            out = torch.cat([full_rows(qg, kg, vg, mask, self.scale), out[:, :, g:]], dim=2)
        return out
