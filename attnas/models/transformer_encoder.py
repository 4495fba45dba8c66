"""A Transformer encoder classifier whose attention is any candidate mechanism or a per-head mix.

Every attention mechanism of :mod:`attnas.ops.attention_mechanisms` is usable alone in an
ordinary encoder (the "homogeneous" models of DARTFormer, Sec. 3.3.1) and a searched
per-head mix is usable as a stacked cell (Sec. 3.3.2); a list of per-layer specs gives a
hybrid whose layers use different mechanisms (e.g. a softmax layer among linear-cost ones,
as in the hybrids of Arora et al. 2023, "Zoology"). The layout follows the Long Range
Arena encoder (Tay et al. 2021): token embedding plus fixed sinusoidal (or learned)
positions, ``depth`` pre-LayerNorm blocks ``x + Attn(LN(x))``, ``x + FFN(LN(x))``, a final
LayerNorm, pooling over real tokens (mean, or a learned ``[CLS]`` token) and a linear
classifier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union

import torch
from torch import nn

from attnas.core.errors import ConfigError, DataError
from attnas.ops.attention_mechanisms import build_mechanism
from attnas.ops.shared.positions import sinusoidal_positions

#: A homogeneous mechanism name, or ``{mechanism: number of single heads}`` for a mix.
MechanismSpec = Union[str, Mapping[str, int]]



class TokenEmbedding(nn.Module):
    """Token embedding plus positions, with an optional learned ``[CLS]`` vector in front.

    Args:
        vocab_size: Number of token ids.
        dim: Model dimension ``D``.
        max_len: Longest token sequence (without ``[CLS]``).
        positions: ``sinusoidal`` (fixed, LRA's default) or ``learned``.
        pad_id: Padding id (its embedding is zero).
        cls: Prepend a learned ``[CLS]`` vector (position 0).

    Shapes:
        - **input:** ``tokens`` ``[B, L]`` long, ``mask`` ``[B, L]`` bool.
        - **output:** ``x`` ``[B, L', D]`` and ``mask`` ``[B, L']`` with ``L' = L + cls``.
    """

    def __init__(self, vocab_size: int, dim: int, max_len: int,
                 positions: Literal["sinusoidal", "learned"] = "sinusoidal", pad_id: int = 0, cls: bool = False):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, dim, padding_idx=pad_id)
        self.max_len, self.cls = max_len, cls
        total = max_len + int(cls)
        if positions == "sinusoidal":
            self.register_buffer("pos", sinusoidal_positions(total, dim), persistent=False)
        elif positions == "learned":
            self.pos = nn.Parameter(torch.randn(total, dim) * 0.02)
        else:
            raise ConfigError(f"positions: must be 'sinusoidal' or 'learned', got {positions!r}")
        self.cls_vector = nn.Parameter(torch.randn(1, 1, dim) * 0.02) if cls else None

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if tokens.dim() != 2:
            raise DataError(f"tokens must have shape [batch, length], got {tuple(tokens.shape)}")
        if tokens.shape[1] > self.max_len:
            raise DataError(f"sequence length {tokens.shape[1]} exceeds the model's max_len {self.max_len}")
        x = self.tokens(tokens)
        if self.cls_vector is not None:
            x = torch.cat([self.cls_vector.expand(x.shape[0], 1, -1), x], dim=1)
            mask = torch.cat([mask.new_ones(mask.shape[0], 1), mask], dim=1)
        return x + self.pos[: x.shape[1]], mask


class HeterogeneousAttention(nn.Module):
    """A searched per-head mix: single-head blocks of several mechanisms, averaged.

    With ``H`` single-head blocks (``head_dim = D / H``) each with its own projections,
    the layer is the multi-head block whose heads use different mechanisms (DARTFormer,
    Sec. 3.2: concatenation followed by ``W_O`` equals the sum of per-head output
    projections); the average keeps the scale of the search supernet.

    Args:
        dim: Model dimension ``D``.
        heads: ``{mechanism: number of heads}``.
        max_len: Longest sequence.
        head_dim: Per-head dimension (default ``dim // total heads``).
        options: ``{mechanism: {option: value}}``.

    Shapes:
        - **input:** ``x`` ``[B, L, D]``, ``mask`` ``[B, L]`` bool.
        - **output:** ``[B, L, D]``.
    """

    def __init__(self, dim: int, heads: Mapping[str, int], max_len: int, head_dim: int | None = None,
                 options: Mapping[str, Mapping[str, Any]] | None = None):
        super().__init__()
        total = sum(heads.values())
        if not heads or total < 1 or any(int(n) < 0 for n in heads.values()):
            raise ConfigError(f"a heterogeneous layer needs at least one head, got {dict(heads)}")
        head_dim = head_dim or max(1, dim // total)
        options = options or {}
        self.names: list[str] = []
        blocks = []
        for mech, n in heads.items():
            for i in range(int(n)):
                blocks.append(build_mechanism(mech, dim, heads=1, head_dim=head_dim, max_len=max_len,
                                              **dict(options.get(mech, {}))))
                self.names.append(f"{mech}/{i}")
        self.blocks = nn.ModuleList(blocks)
        self.heads = {m: int(n) for m, n in heads.items() if int(n) > 0}

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.stack([b(x, mask) for b in self.blocks]).mean(dim=0)


def build_attention(spec: MechanismSpec, dim: int, heads: int, max_len: int,
                    options: Mapping[str, Mapping[str, Any]] | None = None) -> nn.Module:
    """An attention layer: one multi-head block of a mechanism, or a heterogeneous mix.

    Args:
        spec: A mechanism name (``heads`` heads) or ``{mechanism: heads}``.
        dim: Model dimension.
        heads: Heads of a homogeneous block (a mix uses ``dim // total`` per head).
        max_len: Longest sequence.
        options: ``{mechanism: {option: value}}``.
    """
    options = options or {}
    if isinstance(spec, str):
        return build_mechanism(spec, dim, heads=heads, max_len=max_len, **dict(options.get(spec, {})))
    if isinstance(spec, Mapping):
        return HeterogeneousAttention(dim, spec, max_len, options=options)
    raise ConfigError(f"mechanism: expected a name or a {{mechanism: heads}} mapping, got {spec!r}")


class EncoderLayer(nn.Module):
    """One Transformer encoder layer around a given attention module.

    Pre-norm (LRA): ``x + Drop(Attn(LN(x)))`` then ``x + Drop(FFN(LN(x)))``; post-norm
    (Vaswani et al. 2017): ``LN(x + Drop(Attn(x)))`` then ``LN(x + Drop(FFN(x)))``.
    The FFN is ``Linear(D, F) -> GELU -> Dropout -> Linear(F, D)``.

    Args:
        attention: Maps ``(x [B, L, D], mask [B, L])`` to ``[B, L, D]``.
        dim: Model dimension ``D``.
        ffn_dim: Hidden size ``F`` of the FFN.
        dropout: Dropout rate.
        norm: ``pre`` or ``post``.

    Shapes:
        - **input:** ``x`` ``[B, L, D]``, ``mask`` ``[B, L]`` bool.
        - **output:** ``[B, L, D]``.
    """

    def __init__(self, attention: nn.Module, dim: int, ffn_dim: int, dropout: float = 0.1,
                 norm: Literal["pre", "post"] = "pre"):
        super().__init__()
        if norm not in ("pre", "post"):
            raise ConfigError(f"norm: must be 'pre' or 'post', got {norm!r}")
        self.attention, self.norm = attention, norm
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(ffn_dim, dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.norm == "pre":
            x = x + self.drop(self.attention(self.ln1(x), mask))
            return x + self.drop(self.ffn(self.ln2(x)))
        x = self.ln1(x + self.drop(self.attention(x, mask)))
        return self.ln2(x + self.drop(self.ffn(x)))


class SequenceClassifier(nn.Module):
    """Embedding, encoder layers, pooling over real tokens and a linear classifier.

    Args:
        embed: A :class:`TokenEmbedding`.
        layers: Encoder layers.
        dim: Model dimension.
        num_classes: Output size.
        norm: ``pre`` adds the final LayerNorm of a pre-norm encoder.
        pool: ``mean`` over real tokens, ``cls`` (position 0; needs ``embed.cls``) or
            ``token`` (no pooling: one prediction per token, e.g. associative recall).

    Shapes:
        - **input:** batch ``{"tokens": [B, L], "mask": [B, L]}``.
        - **output:** logits ``[B, num_classes]`` (``[B, L, num_classes]`` with ``pool: token``).
    """

    def __init__(self, embed: TokenEmbedding, layers: list[nn.Module], dim: int, num_classes: int,
                 norm: Literal["pre", "post"] = "pre", pool: Literal["mean", "cls"] = "mean"):
        super().__init__()
        if pool not in ("mean", "cls", "token"):
            raise ConfigError(f"pool: must be 'mean', 'cls' or 'token', got {pool!r}")
        if pool == "cls" and not embed.cls:
            raise ConfigError("pool 'cls' needs an embedding with a [CLS] token")
        self.embed, self.layers, self.pool = embed, nn.ModuleList(layers), pool
        self.final_norm = nn.LayerNorm(dim) if norm == "pre" else nn.Identity()
        self.classifier = nn.Linear(dim, num_classes)

    def features(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Pooled features ``[B, D]`` of a batch (``[B, L, D]``, one per token, with ``pool: token``)."""
        tokens = batch["tokens"]
        mask = batch.get("mask")
        if mask is None:
            mask = torch.ones_like(tokens, dtype=torch.bool)
        x, mask = self.embed(tokens, mask.bool())
        for layer in self.layers:
            x = layer(x, mask)
        x = self.final_norm(x)
        if self.pool == "token":
            return x
        if self.pool == "cls":
            return x[:, 0]
        w = mask.unsqueeze(-1).to(x.dtype)
        return (x * w).sum(dim=1) / w.sum(dim=1).clamp(min=1.0)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Class logits of a batch of token sequences.

        Args:
            batch: A mapping with ``tokens``, int64 ``[B, L]`` token ids (the dataset's
                vocabulary; ``pad_id`` at pad positions, ``L`` at most ``max_len``), and
                ``mask``, bool ``[B, L]``, True at real tokens (right padding), as the
                sequence-classification task yields (its ``y`` is not read).

        Returns:
            ``[B, classes]`` logits.
        """
        return self.classifier(self.features(batch))


class TransformerEncoderClassifier(SequenceClassifier):
    """An ordinary Transformer encoder classifier with a chosen attention mechanism.

    Args:
        vocab_size: Number of token ids.
        num_classes: Output size.
        mechanism: A mechanism name (homogeneous model), ``{mechanism: heads}`` (the
            searched heterogeneous cell, stacked in every layer) or a list of ``depth``
            such specs, one per layer (a per-layer hybrid, e.g. ``["softmax", "linear"]``).
        dim: Model dimension ``D``.
        depth: Number of encoder layers.
        heads: Heads per layer of a homogeneous model.
        ffn_dim: FFN hidden size (default ``4 * dim``).
        max_len: Longest token sequence.
        dropout: Dropout rate.
        norm: ``pre`` (LRA) or ``post``.
        pool: ``mean``, ``cls`` or ``token`` (per-token logits ``[B, L, num_classes]``).
        positions: ``sinusoidal`` or ``learned``.
        pad_id: Padding id.
        mechanism_options: ``{mechanism: {option: value}}``.

    Shapes:
        - **input:** batch ``{"tokens": [B, L], "mask": [B, L]}``.
        - **output:** logits ``[B, num_classes]``.
    """

    def __init__(self, vocab_size: int, num_classes: int,
                 mechanism: MechanismSpec | Sequence[MechanismSpec] = "softmax", dim: int = 64,
                 depth: int = 2, heads: int = 4, ffn_dim: int | None = None, max_len: int = 512,
                 dropout: float = 0.1, norm: Literal["pre", "post"] = "pre", pool: Literal["mean", "cls"] = "mean",
                 positions: Literal["sinusoidal", "learned"] = "sinusoidal", pad_id: int = 0,
                 mechanism_options: Mapping[str, Mapping[str, Any]] | None = None):
        if depth < 1:
            raise ConfigError(f"depth: must be >= 1, got {depth}")
        per_layer = list(mechanism) if isinstance(mechanism, (list, tuple)) else [mechanism] * depth
        if len(per_layer) != depth:
            raise ConfigError(f"mechanism: {len(per_layer)} per-layer specs for {depth} layers")
        embed = TokenEmbedding(vocab_size, dim, max_len, positions, pad_id, cls=pool == "cls")
        n = max_len + int(pool == "cls")
        layers = [
            EncoderLayer(build_attention(spec, dim, heads, n, mechanism_options), dim, ffn_dim or 4 * dim,
                         dropout, norm)
            for spec in per_layer
        ]
        super().__init__(embed, layers, dim, num_classes, norm, pool)
        self.mechanism = (mechanism if isinstance(mechanism, str) else
                          [m if isinstance(m, str) else dict(m) for m in mechanism]
                          if isinstance(mechanism, (list, tuple)) else dict(mechanism))
