"""Random Synthesizer attention block (input-independent attention weights)."""

from __future__ import annotations

import torch
from torch import nn

from attnas.registry import register_op
from attnas.ops.attention_mechanisms.base import AttentionBlock, masked_fill_keys


@register_op("mechanism", "synthesizer-random")
class RandomSynthesizerAttention(AttentionBlock):
    r"""Random Synthesizer (Tay et al. 2021, "Synthesizer: Rethinking Self-Attention in Transformer Models").

    The attention logits are a randomly initialised matrix
    :math:`R \in \mathbb{R}^{\ell \times \ell}` per head that does not depend on the input
    (Eq. 3-4):

    .. math::
        Y = \mathrm{softmax}(R)\, G(X),

    with :math:`G(X) = X W_V`. ``R`` is learned by default ("Random") or kept at its
    initial value (``trainable=False``, "Fixed Random"). For ``L <= max_len`` tokens the
    top-left ``L x L`` corner is used and padded keys are masked. Memory is
    :math:`O(L^2)`.

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` is ``ell`` (inputs need ``L <= max_len``).

    Args:
        trainable: Learn ``R`` (True) or keep it fixed.
    """

    mechanism = "synthesizer-random"
    memory_growth = "L^2"
    length_bound = True

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024,
                 trainable: bool = True):
        super().__init__(dim, heads, head_dim, max_len, qkv=False)
        self.v = nn.Linear(dim, self.inner)
        r = torch.randn(self.heads, max_len, max_len)
        self.trainable = trainable
        if trainable:
            self.R = nn.Parameter(r)
        else:
            self.register_buffer("R", r)

    def attend_heads(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        logits = self.R[None, :, :n, :n].to(x.dtype)
        probs = torch.softmax(masked_fill_keys(logits, mask[:, None, None, :]), dim=-1)
        return probs @ self.split_heads(self.v(x))
