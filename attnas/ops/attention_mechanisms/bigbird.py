"""BigBird attention block (window + global + random blocks)."""

from __future__ import annotations

import math

import torch

from attnas.core.errors import ConfigError
from attnas.ops.attention_mechanisms.base import AttentionBlock
from attnas.registry import register_op
from attnas.ops.attention_mechanisms.blocked import (
    blocked_attention,
    drop_duplicate_blocks,
    full_rows,
    last_real_position,
)


@register_op("mechanism", "bigbird")
class BigBirdAttention(AttentionBlock):
    r"""BigBird block-sparse attention (Zaheer et al. 2020, "Big Bird: Transformers for Longer Sequences").

    The sequence is cut into blocks of ``block`` tokens and the attention graph combines
    (Sec. 2 and the blocked construction of App. D):

    * a sliding window: query block ``i`` attends to key blocks ``i-1, i, i+1``;
    * ``global_blocks`` global blocks (the first blocks, BigBird-ITC): every query
      attends to them and their queries attend to every key;
    * ``random_blocks`` random key blocks per query block, drawn among the real blocks
      outside the window and the global blocks, without repeats.

    Memory is :math:`O(L \cdot b (3 + g + r))`. The random pattern is stored as uniform
    numbers ``u`` (one per query block and random block, up to ``max_len``) and mapped to
    block indices from the number of *real* blocks of each sequence, so appending
    padding does not change it. It is fixed unless ``redraw_every > 0`` (redrawn every
    that many training passes; never while frozen or in ``eval()`` mode). The pattern is
    shared by the heads.

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` sizes the random pattern (inputs need ``L <=
    max_len``).

    Args:
        block: Block length ``b``.
        global_blocks: Number ``g`` of leading global blocks.
        random_blocks: Number ``r`` of random key blocks per query block.
        redraw_every: Redraw the random pattern every this many training passes (0: fixed).
    """

    mechanism = "bigbird"
    memory_growth = "L"
    length_bound = True
    has_random = True

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024, block: int = 16,
                 global_blocks: int = 1, random_blocks: int = 2, redraw_every: int = 0):
        super().__init__(dim, heads, head_dim, max_len)
        if block < 1 or global_blocks < 0 or random_blocks < 0 or redraw_every < 0:
            raise ConfigError(
                f"{self._what()}: need block >= 1 and global_blocks, random_blocks, redraw_every >= 0"
            )
        self.block, self.global_blocks, self.random_blocks = block, global_blocks, random_blocks
        self.redraw_every = redraw_every
        self.register_buffer("rand_u", torch.empty(math.ceil(max_len / block), random_blocks))
        self.redraw_random()

    def redraw_random(self) -> None:
        self.rand_u.copy_(torch.rand(self.rand_u.shape, device=self.rand_u.device))

    def key_blocks(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Key-block indices ``[B, nb, 3 + g + r]`` of every query block and their validity."""
        n = mask.shape[1]
        dev = mask.device
        nb, g = -(-n // self.block), self.global_blocks  # ceil in integers (serialisable when traced)
        i = torch.arange(nb, device=dev)
        window = (i[:, None] + torch.arange(-1, 2, device=dev))[None].expand(mask.shape[0], nb, 3)
        glob = torch.arange(g, device=dev).expand(mask.shape[0], nb, g)
        n_real = torch.div(last_real_position(mask) + self.block - 1, self.block, rounding_mode="floor")[:, None]
        # eligible random blocks: [g, n_real) minus the window {i-1, i, i+1}
        ws = torch.clamp(i - 1, min=g)[None]
        we = torch.minimum(i[None] + 1, n_real - 1)
        wcount = (we - ws + 1).clamp(min=0)
        eligible = (n_real - g - wcount).clamp(min=0)
        # r distinct picks among the `eligible` blocks: the j-th is uniform over the e - j not yet taken
        u = self.rand_u[:nb].to(torch.float64)[None]  # [1, nb, r]
        picks: list[torch.Tensor] = []
        for j in range(self.random_blocks):
            left = (eligible - j).clamp(min=1)
            c = torch.minimum((u[..., j] * left).floor().long(), left - 1)
            if picks:
                for p in torch.stack(picks, dim=-1).sort(dim=-1).values.unbind(-1):
                    c = c + (c >= p).long()
            picks.append(c)
        pick = torch.stack(picks, dim=-1) if picks else eligible.new_zeros(*eligible.shape, 0)
        rand = g + pick
        rand = rand + wcount[..., None] * (rand >= ws[..., None])
        rand_ok = torch.arange(self.random_blocks, device=dev) < eligible[..., None]
        idx = torch.cat([window, glob, rand], dim=-1)
        ok = torch.cat([(window >= 0) & (window < nb), glob < nb, rand_ok], dim=-1)
        return idx, drop_duplicate_blocks(idx, ok)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        idx, ok = self.key_blocks(mask)
        out = blocked_attention(q, k, v, mask, self.block, idx, ok, self.scale)
        gl = min(self.global_blocks * self.block, q.shape[2])
        if gl:
            out = torch.cat([full_rows(q[:, :, :gl], k, v, mask, self.scale), out[:, :, gl:]], dim=2)
        return out
