"""The "24-layer Transformer" text baseline of AutoAttend's Table 4, as a one-point space.

Used with the ``fixed`` strategy so that the baseline runs in the same harness as the
searched encoders (same task, GloVe stem, masked max-pooling head, training loop and
retraining seeds)::

    space:    {name: text-transformer, layers: 24, hidden: 64, heads: 8}
    strategy: {name: fixed, arch: {model: transformer}}

The model is :class:`~attnas.models.text_encoder.TransformerTextClassifier`: the text
stem, position encodings, ``layers`` standard Transformer encoder layers (Vaswani et
al., 2017; multi-head self-attention with key padding masks and a feed-forward block,
pre-LayerNorm by default) and the pooling head. ``choices`` is ``{"model": "transformer"}``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from torch import nn

from attnas.config import CheckedConfig, Fraction, NonNegativeInt, PositiveInt
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError
from attnas.registry import register_space
from attnas.spaces.base import Space


@dataclass(frozen=True)
class TextTransformerConfig(CheckedConfig):
    """Options of the Transformer baseline (defaults: AutoAttend's NLP setting, Sec. 5.2.3).

    Attributes:
        layers: Encoder layers (24 in Table 4).
        hidden: Model size.
        heads: Attention heads (8, as the attention layer of the searched models).
        ff_dim: Feed-forward size (0: ``4 * hidden``).
        dropout: Dropout (0.1).
        positions: ``sinusoidal``, ``learned`` or ``none``.
        pooling: Head pooling over real tokens.
        norm_first: Pre-LayerNorm (True) or post-LayerNorm (False) layers.
    """

    layers: PositiveInt = 24
    hidden: PositiveInt = 64
    heads: PositiveInt = 8
    ff_dim: NonNegativeInt = 0
    dropout: Fraction = 0.1
    positions: Literal["sinusoidal", "learned", "none"] = "sinusoidal"
    pooling: Literal["max", "mean", "max+mean"] = "max"
    norm_first: bool = True

    field_prefix = "space."

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden % self.heads:
            raise ConfigError(f"space.hidden: {self.hidden} is not divisible by space.heads={self.heads}")


@register_space("text-transformer")
class TextTransformerSpace(Space):
    """The Transformer text baseline (a one-point space for the ``fixed`` strategy)."""

    name = "text-transformer"
    Config = TextTransformerConfig
    capabilities = frozenset({"dag"})
    task_kinds = ("text",)

    def sample(self, rng: random.Random) -> Arch:
        return self.arch({"model": "transformer"})

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        raise ArchError("the text-transformer space has a single architecture; there is nothing to mutate")

    def validate(self, arch: Arch) -> None:
        super().validate(arch)
        if arch.choices != {"model": "transformer"}:
            raise ArchError(f"choices must be {{'model': 'transformer'}}, got {arch.choices!r}")

    def size(self) -> int:
        return 1

    def describe(self, arch: Arch) -> str:
        o = self.options
        return f"transformer(layers={o.layers}, hidden={o.hidden}, heads={o.heads})"

    def build(self, arch: Arch, task: Any) -> nn.Module:
        """The :class:`~attnas.models.text_encoder.TransformerTextClassifier` for ``task``."""
        from attnas.models.text_encoder import TransformerTextClassifier

        self.validate(arch)
        o = self.options
        return TransformerTextClassifier.from_task(task, hidden=o.hidden, layers=o.layers, heads=o.heads,
                                                   ff_dim=o.ff_dim or None, dropout=o.dropout,
                                                   positions=o.positions, pooling=o.pooling,
                                                   norm_first=o.norm_first)

    def to_dag(self, arch: Arch) -> tuple[np.ndarray, list[str]]:
        labels = ["input", *["transformer_layer"] * self.options.layers, "output"]
        return np.eye(len(labels), k=1, dtype=np.int64), labels
