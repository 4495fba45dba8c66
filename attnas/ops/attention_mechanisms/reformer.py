"""Reformer attention block (LSH attention with shared queries and keys)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnas.core.errors import ConfigError
from attnas.ops.attention_mechanisms.base import NEG_INF, AttentionBlock
from attnas.registry import register_op

SELF_SCORE = -1e5  # Reformer: a token attends to itself only when it has no other target


def _chunks_with_lookback(t: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``t [..., Lp, *f]`` -> (own chunks ``[..., nc, c, *f]``, own + previous chunk ``[..., nc, 2c, *f]``)."""
    lead = t.shape[:3]
    rest = t.shape[4:]
    own = t.reshape(*lead, t.shape[3] // chunk, chunk, *rest)
    prev = torch.cat([own[:, :, :, :1], own[:, :, :, :-1]], dim=3)  # chunk 0's "previous" is masked out
    return own, torch.cat([prev, own], dim=4)


@register_op("mechanism", "reformer")
class ReformerAttention(AttentionBlock):
    r"""Reformer LSH attention (Kitaev et al. 2020, "Reformer: The Efficient Transformer").

    * Shared QK (Sec. 2): one projection gives the queries and the keys
      :math:`k_j = q_j / \lVert q_j \rVert`.
    * Angular LSH (Sec. 2, "Locality sensitive hashing"): with a random rotation
      :math:`R \in \mathbb{R}^{d_h \times b/2}`, :math:`h(x) = \arg\max([xR; -xR])`
      assigns one of ``n_buckets`` buckets.
    * Sorting and chunking (Sec. 2, "LSH attention", Fig. 2): positions are sorted by
      (bucket, position), cut into chunks of ``bucket_size`` tokens, and every query attends
      to the keys of its own chunk and of the previous one that share its bucket. A
      token attends to itself only if nothing else is available (score :math:`-10^5`).
    * Multi-round hashing (Sec. 2 "Multi-round LSH attention" and App. A): ``n_hashes``
      independent rounds; the score of a pair found in :math:`N_{i,j}` rounds is reduced
      by :math:`\log N_{i,j}` and the rounds are combined with weights
      :math:`\exp(z^{(r)}_i - \log\sum_{r'} e^{z^{(r')}_i})`, where :math:`z^{(r)}_i` is
      round ``r``'s log-normaliser.

    Memory is :math:`O(n_{hashes} \cdot L \cdot c)` for chunk length ``c``: no ``L x L``
    matrix. ``n_buckets`` is fixed at construction (default about
    ``max_len / bucket_size``, so a bucket holds about one chunk, as in the paper).
    Padded tokens are put in an extra last bucket and chunk 0 has no previous chunk, so
    appending padding does not move any real token's chunk. Rotations are redrawn every
    ``redraw_every`` training passes (the reference implementation samples them anew
    for each pass; 0: fixed), never while frozen or in ``eval()`` mode.

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` sets the default ``n_buckets`` only.

    Args:
        n_hashes: Hash rounds.
        n_buckets: Buckets per round (even; default ``~max_len / bucket_size``).
        bucket_size: Chunk length ``c`` (the "bucket size" of common implementations).
        redraw_every: Redraw rotations every this many training passes (0: fixed).
    """

    mechanism = "reformer"
    memory_growth = "L"
    has_random = True

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024, n_hashes: int = 2,
                 n_buckets: int | None = None, bucket_size: int = 32, redraw_every: int = 1):
        super().__init__(dim, heads, head_dim, max_len, qkv=False)
        if n_buckets is None:
            n_buckets = max(2, math.ceil(max_len / bucket_size))
            n_buckets += n_buckets % 2
        if n_hashes < 1 or bucket_size < 1 or redraw_every < 0 or n_buckets < 2 or n_buckets % 2:
            raise ConfigError(
                f"{self._what()}: need n_hashes >= 1, bucket_size >= 1, redraw_every >= 0 and an even n_buckets >= 2; "
                f"got n_hashes={n_hashes}, bucket_size={bucket_size}, redraw_every={redraw_every}, "
                f"n_buckets={n_buckets}"
            )
        self.n_hashes, self.n_buckets, self.bucket_size = n_hashes, n_buckets, bucket_size
        self.redraw_every = redraw_every
        self.qk = nn.Linear(dim, self.inner)
        self.v = nn.Linear(dim, self.inner)
        self.register_buffer("rotations", torch.empty(self.heads, n_hashes, self.head_dim, n_buckets // 2))
        self.redraw_random()

    def redraw_random(self) -> None:
        self.rotations.copy_(torch.randn(self.rotations.shape, device=self.rotations.device))

    def hash(self, keys: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Bucket of every position in every round ``[B, H, R, L]``; padding gets bucket ``n_buckets``."""
        rot = torch.einsum("bhld,hrdn->bhrln", keys, self.rotations.to(keys.dtype))
        buckets = torch.cat([rot, -rot], dim=-1).argmax(dim=-1)
        return buckets.masked_fill(~mask[:, None, None, :], self.n_buckets)

    def attend_heads(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        qk = self.split_heads(self.qk(x))
        v = self.split_heads(self.v(x))
        bsz, heads, n, d = qk.shape
        rounds, c = self.n_hashes, self.bucket_size
        keys = F.normalize(qk, dim=-1)
        buckets = self.hash(keys, mask)  # [B, H, R, L]
        pos = torch.arange(n, device=x.device)
        order = (buckets * n + pos).argsort(dim=-1)  # sort by (bucket, position)
        lp = -(-n // c) * c  # ceil(n / c) * c in integers (a traced program can serialise it)
        # index n is a dummy (invalid) position used to fill the last chunk
        order_p = torch.cat([order, order.new_full((bsz, heads, rounds, lp - n), n)], dim=-1)

        def sort(t: torch.Tensor, fill: float | int | bool) -> torch.Tensor:  # t [B, H, L, *f] -> [B, H, R, Lp, *f]
            t = torch.cat([t, t.new_full((bsz, heads, 1, *t.shape[3:]), fill)], dim=2)
            t = t[:, :, None].expand(bsz, heads, rounds, *t.shape[2:])
            idx = order_p.view(*order_p.shape, *([1] * (t.dim() - 4))).expand(*order_p.shape, *t.shape[4:])
            return torch.gather(t, 3, idx)

        valid = sort(mask[:, None, :, None].expand(bsz, heads, n, 1), False)[..., 0]
        all_buckets = buckets.permute(0, 1, 3, 2)  # [B, H, L, R]: every round's bucket, for N_ij
        q_own, _ = _chunks_with_lookback(sort(qk, 0.0), c)
        _, k_look = _chunks_with_lookback(sort(keys, 0.0), c)
        _, v_look = _chunks_with_lookback(sort(v, 0.0), c)
        pos_own, pos_look = _chunks_with_lookback(order_p, c)
        _, valid_look = _chunks_with_lookback(valid, c)
        first = torch.zeros_like(valid_look)
        first[:, :, :, 0, :c] = True  # chunk 0 has no previous chunk
        valid_look = valid_look & ~first
        b_own, b_look = _chunks_with_lookback(sort(all_buckets, -1), c)  # [..., nc, c|2c, R]
        r_idx = torch.arange(rounds, device=x.device).view(1, 1, rounds, 1, 1)
        this_q = torch.gather(b_own, -1, r_idx[..., None].expand(*b_own.shape[:-1], 1))[..., 0]
        this_k = torch.gather(b_look, -1, r_idx[..., None].expand(*b_look.shape[:-1], 1))[..., 0]

        scores = torch.einsum("bhrnqd,bhrnkd->bhrnqk", q_own, k_look) * self.scale
        ok = valid_look[..., None, :] & (this_q[..., :, None] == this_k[..., None, :])
        if rounds > 1:  # N_ij: in how many rounds i and j share a bucket (App. A)
            shared = (b_own[..., :, None, :] == b_look[..., None, :, :]).sum(dim=-1).clamp(min=1)
            scores = scores - torch.log(shared.to(scores.dtype))
        is_self = (pos_own[..., :, None] == pos_look[..., None, :]) & ok
        scores = scores.masked_fill(~ok, NEG_INF).masked_fill(is_self, SELF_SCORE)
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        out = torch.exp(scores - lse) @ v_look  # [B, H, R, nc, c, d]
        # undo the sort of every round and combine the rounds by their normalisers
        inverse = order.argsort(dim=-1)
        out = torch.gather(out.reshape(bsz, heads, rounds, lp, d)[:, :, :, :n], 3,
                           inverse[..., None].expand(bsz, heads, rounds, n, d))
        lse = torch.gather(lse.reshape(bsz, heads, rounds, lp)[:, :, :, :n], 3, inverse)
        weights = torch.softmax(lse, dim=2)
        return (out * weights[..., None]).sum(dim=2)
