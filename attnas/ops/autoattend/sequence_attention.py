"""Attention over padded sequences: AutoAttend's attention layer and a self-attention op.

:class:`SequenceAttention` is the aggregation of AutoAttend's *attention layer*
(Guan et al., ICML 2021, Sec. 4.1.2, Eq. 4 and Eq. 8): the query, key and value come
from three searched connections, so the layer itself has no projections. It splits
them into :math:`h = 8` heads (Sec. 5.2.2, NLP) and computes scaled dot-product
attention with the pad keys masked out.

:class:`SelfAttentionOp` is the *intra-layer self-attention* operation that the Table 6
ablation (Sec. 5.4.1) adds to the primitive pool of the baseline space, as TextNAS
does: standard multi-head self-attention with its own query/key/value/output
projections. It is registered in the ``text`` pool as ``self_attention`` but is not
part of the default pool (:data:`attnas.ops.autoattend.text.DEFAULT_TEXT_POOL`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnas.core.errors import ConfigError
from attnas.ops.autoattend.sequence_context import SequenceContext
from attnas.ops.shared.dropout import FastDropout, fast_dropout
from attnas.registry import register_op


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``[B, L, H]`` -> ``[B * heads, L, H / heads]`` (Row_Split of Eq. 8)."""
    B, L, H = x.shape
    return x.reshape(B, L, heads, H // heads).transpose(1, 2).reshape(B * heads, L, H // heads)


def _merge_heads(x: torch.Tensor, batch: int) -> torch.Tensor:
    """``[B * heads, L, d]`` -> ``[B, L, heads * d]`` (Row_Cat of Eq. 8)."""
    Bh, L, d = x.shape
    heads = Bh // batch
    return x.reshape(batch, heads, L, d).transpose(1, 2).reshape(batch, L, heads * d)


def _key_bias(ctx: SequenceContext, heads: int, dtype: torch.dtype) -> torch.Tensor:
    """``[B * heads, 1, L]``: 0 at real keys, ``-inf`` at pad keys (cached on ``ctx``)."""
    cache = ctx.__dict__.setdefault("_key_bias", {})
    if (heads, dtype) not in cache:
        bias = torch.zeros(ctx.mask.shape, dtype=dtype, device=ctx.mask.device).masked_fill(~ctx.mask, float("-inf"))
        cache[(heads, dtype)] = bias.repeat_interleave(heads, dim=0)[:, None, :]
    return cache[(heads, dtype)]


def softmax_lastdim(x: torch.Tensor) -> torch.Tensor:
    """``softmax(x, dim=-1)``; written out for rows shorter than 16.

    On CPU, ``torch.softmax`` over a last dimension shorter than 16 is several times
    slower than its written-out form (measured for ``[1024, 15, 15]``, one thread:
    4.0 ms vs 0.7 ms forward, 6.2 ms vs 3.8 ms forward + backward), while from 16 on the
    kernel wins, most clearly in the backward pass.
    """
    if x.shape[-1] >= 16:
        return torch.softmax(x, dim=-1)
    e = (x - x.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def masked_multihead_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: SequenceContext,
                               heads: int, dropout: float = 0.0, zero_pad_queries: bool = True) -> torch.Tensor:
    r"""Multi-head scaled dot-product attention with key padding masks (Eq. 8).

    .. math::
        \mathbf{O}_i = \mathrm{Softmax}\left(\frac{\mathbf{Q}_i \mathbf{K}_i^\top}
        {\sqrt{d/h}}\right)\mathbf{V}_i, \qquad
        \mathrm{Out} = \mathrm{Row\_Cat}(\mathbf{O}_1, \dots, \mathbf{O}_h)

    where pad keys get a score of :math:`-\infty`. Rows of pad queries are set to zero
    (unless ``zero_pad_queries`` is off: for callers that zero them later themselves,
    after position-wise operations only; their values there are finite).
    Computed with batched matrix products over ``B * h`` heads (``baddbmm`` adds the key
    mask while scaling), which on CPU is faster than ``scaled_dot_product_attention`` for
    the small head size of text models (d/h = 8) and does not depend on the inputs'
    memory layout (SDPA falls back to a slower path for non-contiguous inputs).

    Args:
        q: Queries.
        k: Keys.
        v: Values.
        ctx: Padding of the batch (keys and queries share it).
        heads: Number of heads :math:`h`; must divide :math:`H`.
        dropout: Dropout on the attention weights (training only; pass 0 in eval).
        zero_pad_queries: Zero the output rows of pad queries.

    Shapes:
        - **q, k, v:** :math:`(B, L, H)`
        - **output:** :math:`(B, L, H)`
    """
    B, L, H = q.shape
    qs, ks, vs = _split_heads(q, heads), _split_heads(k, heads), _split_heads(v, heads)
    scale = 1.0 / math.sqrt(H // heads)
    if ctx.has_pad:
        scores = torch.baddbmm(_key_bias(ctx, heads, q.dtype), qs, ks.transpose(1, 2), alpha=scale)
    else:
        scores = torch.bmm(qs, ks.transpose(1, 2)).mul_(scale)
    weights = fast_dropout(softmax_lastdim(scores), dropout, dropout > 0)
    out = _merge_heads(torch.bmm(weights, vs), B)
    return ctx.zero_pads(out) if zero_pad_queries else out


def _check_heads(dim: int, heads: int) -> None:
    if not isinstance(dim, int) or dim < 1:
        raise ConfigError(f"attention dim must be a positive integer, got {dim!r}")
    if heads < 1 or dim % heads:
        raise ConfigError(f"attention heads ({heads}) must divide the hidden size ({dim})")


class SequenceAttention(nn.Module):
    r"""AutoAttend's attention layer for sequences (Sec. 4.1.2, Eq. 2, 4 and 8).

    Aggregates the outputs of its three connections, :math:`\mathbf{Q} = O_Q(S_Q)`,
    :math:`\mathbf{K} = O_K(S_K)`, :math:`\mathbf{V} = O_V(S_V)`, by 8-head scaled
    dot-product attention (Eq. 8) without extra projections. Following the reference
    implementation, the result can be followed by dropout and a LayerNorm (the layer's
    own normalisation). Pad positions of the output are zero.

    Args:
        dim: Hidden size :math:`H`.
        heads: Number of heads :math:`h` (8 for NLP in the paper).
        attn_dropout: Dropout on the attention weights.
        dropout: Dropout on the output.
        norm: LayerNorm on the output.

    Shapes:
        - **q, k, v:** :math:`(B, L, H)`
        - **output:** :math:`(B, L, H)`
    """

    def __init__(self, dim: int, heads: int = 8, *, attn_dropout: float = 0.0, dropout: float = 0.0,
                 norm: bool = True):
        super().__init__()
        _check_heads(dim, heads)
        self.dim, self.heads, self.attn_dropout = dim, heads, attn_dropout
        self.dropout = FastDropout(dropout)
        self.norm = nn.LayerNorm(dim) if norm else nn.Identity()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        # dropout and LayerNorm act per position, so the pad rows are zeroed once, at the end
        # (the same values at real positions and the same gradients: pads get none)
        out = masked_multihead_attention(q, k, v, ctx, self.heads, self.attn_dropout if self.training else 0.0,
                                         zero_pad_queries=False)
        return ctx.zero_pads(self.norm(self.dropout(out)))


@register_op("text", "self_attention", in_default_pool=False)
class SelfAttentionOp(nn.Module):
    r"""Intra-layer multi-head self-attention, a primitive operation (Sec. 5.4.1, Table 6).

    The standard self-attention of Vaswani et al. (2017) with its own projections,
    :math:`\mathrm{Out} = W_O\,\mathrm{MHA}(W_Q x, W_K x, W_V x)`, where MHA is Eq. 8
    with pad keys masked; as in TextNAS' attention operation the input may be
    LayerNorm'd and the projections have no bias. The Table 6 baseline space adds it
    to the text pool in place of the attention layer. Pad positions of the output are
    zero.

    Args:
        dim: Hidden size :math:`H`.
        heads: Number of heads (must divide ``dim``).
        dropout: Dropout on the attention weights.
        pre_norm: LayerNorm on the input.

    Shapes:
        - **input:** :math:`(B, L, H)`
        - **output:** :math:`(B, L, H)`
    """

    def __init__(self, dim: int, *, heads: int = 8, dropout: float = 0.0, pre_norm: bool = True, **_: object):
        super().__init__()
        _check_heads(dim, heads)
        self.heads, self.attn_dropout = heads, dropout
        self.norm = nn.LayerNorm(dim) if pre_norm else nn.Identity()
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        h = masked_multihead_attention(q, k, v, ctx, self.heads, self.attn_dropout if self.training else 0.0)
        return ctx.zero_pads(self.out(h))
