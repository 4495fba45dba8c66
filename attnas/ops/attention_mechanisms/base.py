"""The common shape of a candidate attention block.

DARTFormer (Brown et al. 2022, Sec. 3.2) searches over complete multi-head attention
blocks rather than over the attention kernel alone, because some mechanisms (Reformer's
shared query-key projection, Synthesizer's missing keys) change the projections
themselves. An :class:`AttentionBlock` therefore owns

1. its input projections ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V`` into ``H`` heads of
   ``d_h`` features (Vaswani et al. 2017, Eq. 1-2),
2. the mechanism's attention on each head (:meth:`AttentionBlock.attend`),
3. the concatenation of the heads and the output projection ``W_O`` back to ``D``.

Padding: ``mask[b, j]`` is ``True`` for a real token and ``False`` for padding. Padded
keys never contribute to any output and outputs at padded positions are zero, so the
outputs at real positions do not change when padding is appended.

Random structure (Performer features, Reformer hash rotations, BigBird random blocks) is
kept in buffers. It is redrawn every ``redraw_every`` training forward passes (0: never)
and never while the block is frozen (:meth:`AttentionBlock.freeze_random`) or in
``eval()`` mode, so masked-validation scoring sees the same random structure in every
evaluation.
"""

from __future__ import annotations

import inspect
from typing import ClassVar

import torch
from torch import nn

from attnas.core.errors import ConfigError, DataError

_BASE_ARGS = ("self", "dim", "heads", "head_dim", "max_len")


class AttentionBlock(nn.Module):
    """Base class of the candidate multi-head attention blocks.

    Args:
        dim: Model dimension ``D`` of input and output.
        heads: Number of heads ``H`` (``1`` for the single-head blocks of the
            heterogeneous search).
        head_dim: Per-head dimension ``d_h`` (default ``dim // heads``).
        max_len: Longest sequence accepted. Only mechanisms whose parameters or
            patterns are sized by the length (``length_bound = True``) enforce it.
        qkv: Whether to create the standard ``W_Q, W_K, W_V`` projections.

    Shapes:
        - **input:** ``x`` ``[B, L, D]``, ``mask`` ``[B, L]`` (bool, True = real) or None.
        - **output:** ``[B, L, D]`` (zero at padded positions).
    """

    mechanism: ClassVar[str] = ""
    #: How the memory of one forward pass grows with the length ``L`` (for reports).
    memory_growth: ClassVar[str] = "L^2"
    #: Whether the block has parameters or patterns sized by ``max_len``.
    length_bound: ClassVar[bool] = False
    #: Whether the block holds random structure that :meth:`freeze_random` fixes.
    has_random: ClassVar[bool] = False

    def __init__(self, dim: int, heads: int = 4, head_dim: int | None = None, max_len: int = 1024, *,
                 qkv: bool = True):
        super().__init__()
        for name, value in (("dim", dim), ("heads", heads), ("max_len", max_len)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{self._what()}: {name} must be a positive integer, got {value!r}")
        if head_dim is None:
            if dim % heads:
                raise ConfigError(
                    f"{self._what()}: dim {dim} is not divisible by heads {heads}; pass head_dim explicitly"
                )
            head_dim = dim // heads
        if not isinstance(head_dim, int) or head_dim < 1:
            raise ConfigError(f"{self._what()}: head_dim must be a positive integer, got {head_dim!r}")
        self.dim, self.heads, self.head_dim, self.max_len = dim, heads, head_dim, max_len
        self.inner = heads * head_dim
        self.scale = head_dim**-0.5
        if qkv:
            self.q = nn.Linear(dim, self.inner)
            self.k = nn.Linear(dim, self.inner)
            self.v = nn.Linear(dim, self.inner)
        self.out = nn.Linear(self.inner, dim)
        self.frozen = False
        self.redraw_every = 0
        self._training_calls = 0

    # -- options ---------------------------------------------------------------------------------

    @classmethod
    def option_names(cls) -> set[str]:
        """Names of the mechanism-specific keyword options of the constructor."""
        params = inspect.signature(cls.__init__).parameters
        return {n for n, p in params.items() if n not in _BASE_ARGS and p.kind is not p.VAR_KEYWORD}

    def _what(self) -> str:
        return f"attention mechanism '{self.mechanism or type(self).__name__}'"

    def extra_repr(self) -> str:
        return f"dim={self.dim}, heads={self.heads}, head_dim={self.head_dim}, max_len={self.max_len}"

    # -- random structure ------------------------------------------------------------------------

    def freeze_random(self, frozen: bool = True) -> AttentionBlock:
        """Fix (or release) the block's random structure; a no-op for deterministic blocks."""
        self.frozen = bool(frozen)
        return self

    def redraw_random(self) -> None:
        """Draw fresh random structure (features, rotations, random blocks) from torch's RNG."""

    def _step_random(self) -> None:
        if self.training and not self.frozen and self.redraw_every > 0:
            self._training_calls += 1
            if self._training_calls % self.redraw_every == 0:
                self.redraw_random()

    # -- forward ---------------------------------------------------------------------------------

    def split_heads(self, t: torch.Tensor) -> torch.Tensor:
        """``[B, L, H * d_h] -> [B, H, L, d_h]``."""
        b, n, _ = t.shape
        return t.view(b, n, self.heads, -1).transpose(1, 2)

    def check_input(self, x: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Validate ``x`` and ``mask``; returns ``mask`` as a bool tensor."""
        if not torch.is_tensor(x) or x.dim() != 3 or x.size(-1) != self.dim:
            shape = tuple(x.shape) if torch.is_tensor(x) else type(x).__name__
            raise DataError(f"{self._what()}: input must have shape [batch, length, {self.dim}], got {shape}")
        b, n, _ = x.shape
        if n == 0:
            raise DataError(f"{self._what()}: input has length 0")
        if self.length_bound and n > self.max_len:
            raise ConfigError(
                f"{self._what()}: sequence length {n} exceeds max_len {self.max_len} the block was built for; "
                f"build it with a larger max_len"
            )
        if mask is None:
            return x, torch.ones(b, n, dtype=torch.bool, device=x.device)
        if mask.shape != (b, n):
            raise DataError(f"{self._what()}: mask must have shape [{b}, {n}] like the input, got {tuple(mask.shape)}")
        return x, mask if mask.dtype == torch.bool else mask != 0

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attend over ``x``.

        Args:
            x: Input features ``[B, L, D]``.
            mask: ``[B, L]`` bool, ``True`` at real tokens (None: no padding).

        Returns:
            ``[B, L, D]``, zero at padded positions.
        """
        x, mask = self.check_input(x, mask)
        self._step_random()
        heads = self.attend_heads(x, mask)
        b, _, n, _ = heads.shape
        y = self.out(heads.transpose(1, 2).reshape(b, n, self.inner))
        return y * mask.unsqueeze(-1).to(y.dtype)

    def attend_heads(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Project ``x`` to queries, keys and values and attend; returns ``[B, H, L, d_h]``."""
        q, k, v = (self.split_heads(proj(x)) for proj in (self.q, self.k, self.v))
        return self.attend(q, k, v, mask)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The mechanism's attention on every head.

        Args:
            q: Queries ``[B, H, L, d_h]``.
            k: Keys ``[B, H, L, d_h]``.
            v: Values ``[B, H, L, d_h]``.
            mask: ``[B, L]`` bool, True at real tokens.

        Returns:
            ``[B, H, L, d_h]``.
        """
        raise NotImplementedError


NEG_INF = -1e9  # finite "minus infinity": a fully masked row gives a finite (ignored) output, never NaN


def masked_fill_keys(scores: torch.Tensor, key_ok: torch.Tensor) -> torch.Tensor:
    """Set scores of keys where ``key_ok`` is False to a large negative number."""
    return scores.masked_fill(~key_ok, NEG_INF)
