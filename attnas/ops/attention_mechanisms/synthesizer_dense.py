"""Dense Synthesizer attention block (attention weights synthesised from each token alone)."""

from __future__ import annotations

import torch
from torch import nn

from attnas.registry import register_op
from attnas.ops.attention_mechanisms.base import AttentionBlock, masked_fill_keys


@register_op("mechanism", "synthesizer-dense")
class DenseSynthesizerAttention(AttentionBlock):
    r"""Dense Synthesizer (Tay et al. 2021, "Synthesizer: Rethinking Self-Attention in Transformer Models").

    No query-key dot products: each token :math:`X_i` synthesises its own row of
    attention logits over the ``ell = max_len`` positions with a two-layer network
    (Eq. 1-2),

    .. math::
        B_i = F(X_i) = W_2\, \sigma_R(W_1 X_i + b_1) + b_2, \qquad
        Y = \mathrm{softmax}(B)\, G(X),

    per head, where :math:`G(X) = X W_V` is the value projection. For a sequence of
    ``L <= max_len`` tokens the first ``L`` logits are used and padded keys are masked.
    Memory is :math:`O(L \cdot \ell)` (quadratic; the paper makes no sub-quadratic claim
    for this variant).

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` is ``ell`` (inputs need ``L <= max_len``) and
    ``head_dim`` is also the hidden width of :math:`F` per head and the value size.
    """

    mechanism = "synthesizer-dense"
    memory_growth = "L^2"
    length_bound = True

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024):
        super().__init__(dim, heads, head_dim, max_len, qkv=False)
        self.v = nn.Linear(dim, self.inner)
        self.f1 = nn.Linear(dim, self.inner)
        self.w2 = nn.Parameter(torch.randn(self.heads, self.head_dim, max_len) * self.head_dim**-0.5)
        self.b2 = nn.Parameter(torch.zeros(self.heads, max_len))

    def attend_heads(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        hidden = self.split_heads(torch.relu(self.f1(x)))  # [B, H, L, d_h]
        logits = torch.einsum("bhld,hdm->bhlm", hidden, self.w2[:, :, :n]) + self.b2[None, :, None, :n]
        probs = torch.softmax(masked_fill_keys(logits, mask[:, None, None, :]), dim=-1)
        return probs @ self.split_heads(self.v(x))
