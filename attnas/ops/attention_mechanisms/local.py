"""Local (block / chunked) attention block."""

from __future__ import annotations


import torch

from attnas.core.errors import ConfigError
from attnas.ops.attention_mechanisms.base import AttentionBlock
from attnas.ops.attention_mechanisms.blocked import blocked_attention
from attnas.registry import register_op


@register_op("mechanism", "local")
class LocalAttention(AttentionBlock):
    r"""Local attention: softmax attention within fixed, non-overlapping chunks.

    The sequence is cut into chunks of ``window`` tokens and every query attends only to
    the keys of its own chunk (and of ``look_around`` neighbouring chunks on each side):

    .. math::
        \mathrm{head}_i = \mathrm{softmax}\!\left(\frac{q_i K_{C(i)}^\top}{\sqrt{d_h}}\right) V_{C(i)},

    where :math:`C(i)` are the positions of the chunks around :math:`\lfloor i / w
    \rfloor`. This is the "local attention" baseline of the Long Range Arena (Tay et al.
    2021, Sec. 4; block-local attention of Liu et al. 2018 and Parmar et al. 2018); time
    and memory are :math:`O(L w)`.

    ``dim``, ``heads``, ``head_dim``, ``max_len`` and the shapes are those of
    :class:`AttentionBlock`; ``max_len`` is unused here (the block accepts any length).

    Args:
        window: Chunk length ``w``.
        look_around: Neighbouring chunks on each side a chunk also attends to.
    """

    mechanism = "local"
    memory_growth = "L"

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024, window: int = 32,
                 look_around: int = 0):
        super().__init__(dim, heads, head_dim, max_len)
        if window < 1 or look_around < 0:
            raise ConfigError(f"{self._what()}: need window >= 1 and look_around >= 0, got {window}, {look_around}")
        self.window, self.look_around = window, look_around

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        nb = -(-q.shape[2] // self.window)  # ceil in integers (a traced program can serialise it)
        offsets = torch.arange(-self.look_around, self.look_around + 1, device=q.device)
        idx = (torch.arange(nb, device=q.device)[:, None] + offsets)[None]
        ok = (idx >= 0) & (idx < nb)
        return blocked_attention(q, k, v, mask, self.window, idx, ok, self.scale)
