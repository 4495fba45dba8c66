"""Block-sparse attention: each query block attends to a few gathered key blocks.

Shared by the local, Longformer and BigBird blocks. The sequence is cut into blocks of
``block`` positions; query block ``i`` attends to the key blocks ``key_blocks[.., i, :]``
(plus optional extra "global" keys every query sees). Memory is
:math:`O(L \\cdot K \\cdot block)` for ``K`` key blocks per query block: no ``L x L``
matrix is formed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from attnas.ops.attention_mechanisms.base import NEG_INF


def pad_length(t: torch.Tensor, length: int, dim: int, value: float | bool = 0) -> torch.Tensor:
    """Pad ``t`` with ``value`` along ``dim`` up to ``length``."""
    extra = length - t.shape[dim]
    if extra <= 0:
        return t
    pad = [0, 0] * (t.dim() - 1 - dim % t.dim()) + [0, extra]
    return F.pad(t, pad, value=value)


def drop_duplicate_blocks(idx: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """Mark repeated key-block indices as not ok, so no key is counted twice.

    Args:
        idx: Key-block indices ``[..., K]``.
        ok: Validity ``[..., K]`` (bool).

    Returns:
        ``ok`` with every later duplicate of a valid earlier entry set to False.
    """
    ok = ok.clone()
    for j in range(1, idx.shape[-1]):
        dup = ((idx[..., j : j + 1] == idx[..., :j]) & ok[..., :j]).any(dim=-1)
        ok[..., j] &= ~dup
    return ok


def last_real_position(mask: torch.Tensor) -> torch.Tensor:
    """``1 +`` the index of the last real token of each sequence (``[B]``; 0 if none)."""
    pos = torch.arange(1, mask.shape[1] + 1, device=mask.device)
    return (mask.long() * pos).amax(dim=1)


def _gather_blocks(xb: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """``xb [B, H, nb, b, d]`` gathered at block indices ``flat [B' , N]`` -> ``[B, H, N, b, d]``."""
    if flat.shape[0] == 1:
        return xb[:, :, flat[0]]
    b, h, _, blk, d = xb.shape
    index = flat[:, None, :, None, None].expand(b, h, flat.shape[1], blk, d)
    return torch.gather(xb, 2, index)


def blocked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, block: int,
                      key_blocks: torch.Tensor, block_ok: torch.Tensor, scale: float, *,
                      pair_ok: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                      extra_k: torch.Tensor | None = None, extra_v: torch.Tensor | None = None,
                      extra_ok: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax attention restricted to gathered key blocks (plus optional extra keys).

    Args:
        q: Queries ``[B, H, L, d]``.
        k: Keys ``[B, H, L, d]``.
        v: Values ``[B, H, L, d]``.
        mask: ``[B, L]`` bool, True at real tokens.
        block: Block length ``b``; the sequence is padded to ``nb = ceil(L / b)`` blocks.
        key_blocks: Key-block indices per query block, ``[B' , nb, K]`` with ``B'`` 1 or ``B``.
        block_ok: Which of those entries take part, same shape (bool). Callers remove
            out-of-range and duplicate blocks here (see :func:`drop_duplicate_blocks`).
        scale: Score scale (``1 / sqrt(d)``).
        pair_ok: Optional ``f(query_pos [1, nb, b, 1], key_pos [B', nb, 1, K*b]) -> bool``
            restricting individual query-key pairs (e.g. a band).
        extra_k: Keys every query also attends to, ``[B, H, G, d]`` (global tokens).
        extra_v: Their values ``[B, H, G, d]``.
        extra_ok: Their validity ``[B, G]`` (bool).

    Returns:
        ``[B, H, L, d]``.
    """
    bsz, heads, n, d = q.shape
    nb = -(-n // block)  # ceil(n / block) in integers (a traced program can serialise it)
    lp = nb * block
    q, k, v = (pad_length(t, lp, 2) for t in (q, k, v))
    mask = pad_length(mask, lp, 1, False)
    qb, kb, vb = (t.reshape(bsz, heads, nb, block, d) for t in (q, k, v))
    idx = key_blocks.clamp(0, nb - 1)
    nkb = idx.shape[-1]
    flat = idx.reshape(idx.shape[0], nb * nkb)
    kg = _gather_blocks(kb, flat).reshape(bsz, heads, nb, nkb * block, d)
    vg = _gather_blocks(vb, flat).reshape(bsz, heads, nb, nkb * block, d)
    mb = mask.view(bsz, nb, block)
    if flat.shape[0] == 1:
        mg = mb[:, flat[0]]
    else:
        mg = torch.gather(mb, 1, flat[:, :, None].expand(bsz, flat.shape[1], block))
    key_ok = (mg.view(bsz, nb, nkb, block) & block_ok[..., None]).view(bsz, nb, 1, nkb * block)
    if pair_ok is not None:
        kpos = (idx[..., None] * block + torch.arange(block, device=q.device)).view(idx.shape[0], nb, 1, nkb * block)
        qpos = torch.arange(lp, device=q.device).view(1, nb, block, 1)
        key_ok = key_ok & pair_ok(qpos, kpos)
    scores = torch.einsum("bhnqd,bhnkd->bhnqk", qb, kg) * scale
    scores = scores.masked_fill(~key_ok[:, None], NEG_INF)
    if extra_k is not None:
        ext = torch.einsum("bhnqd,bhgd->bhnqg", qb, extra_k) * scale
        ext = ext.masked_fill(~extra_ok[:, None, None, None, :], NEG_INF)
        probs = torch.softmax(torch.cat([scores, ext], dim=-1), dim=-1)
        out = torch.einsum("bhnqk,bhnkd->bhnqd", probs[..., : nkb * block], vg)
        out = out + torch.einsum("bhnqg,bhgd->bhnqd", probs[..., nkb * block :], extra_v)
    else:
        probs = torch.softmax(scores, dim=-1)
        out = torch.einsum("bhnqk,bhnkd->bhnqd", probs, vg)
    return out.reshape(bsz, heads, lp, d)[:, :, :n]


def full_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """Full softmax attention of a few query rows over every real key (global tokens).

    Args:
        q: Queries ``[B, H, G, d]`` (``G`` small).
        k: Keys ``[B, H, L, d]``.
        v: Values ``[B, H, L, d]``.
        mask: ``[B, L]`` bool.
        scale: Score scale.

    Returns:
        ``[B, H, G, d]``; memory :math:`O(G L)`.
    """
    scores = torch.einsum("bhgd,bhld->bhgl", q, k) * scale
    scores = scores.masked_fill(~mask[:, None, None, :], NEG_INF)
    return torch.einsum("bhgl,bhld->bhgd", torch.softmax(scores, dim=-1), v)
