"""The ``mechanism-width`` space: a Transformer encoder's attention mechanism and width.

``choices`` layout::

    {"mechanism": "cosine", "dim": 64}

Both come from the space's options (``candidates``, ``dims``); the network is attnas's
:class:`~attnas.models.transformer_encoder.TransformerEncoderClassifier` (embedding with
positions, ``depth`` pre-norm encoder layers, mean pooling, a linear classifier), so it
trains, resumes and exports like any model of the ``attention-mechanisms`` space. It runs
with the strategies that need nothing of a space but ``sample``, ``mutate`` and ``build``
(``random-trained``, ``fixed``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from torch import nn

from attnas import names, register_space
from attnas.config import CheckedConfig, Fraction, PositiveInt
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError
from attnas.models.transformer_encoder import TransformerEncoderClassifier
from attnas.spaces.base import Space


@dataclass(frozen=True)
class MechanismWidthConfig(CheckedConfig):
    """Options of the ``mechanism-width`` space.

    Attributes:
        candidates: Attention mechanisms to choose from (names of the ``mechanism`` pool).
        dims: Model widths to choose from; each must be a multiple of ``heads``.
        depth: Encoder layers.
        heads: Attention heads per layer.
        dropout: Dropout rate.
    """

    candidates: tuple[str, ...] = ("softmax", "cosine")
    dims: tuple[int, ...] = (32, 64)
    depth: PositiveInt = 2
    heads: PositiveInt = 4
    dropout: Fraction = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()  # the ranges of the field types (CheckedConfig)
        known = names("op", "mechanism")
        for name in self.candidates:
            if name not in known:
                raise ConfigError(f"candidates: unknown attention mechanism {name!r}; known: {', '.join(known)}")
        for dim in self.dims:
            if dim < 1 or dim % self.heads:
                raise ConfigError(f"dims: {dim} is not a positive multiple of heads={self.heads}")
        if not self.candidates or not self.dims:
            raise ConfigError("the space needs at least one candidate and one width")


@register_space("mechanism-width")
class MechanismWidthSpace(Space):
    """A Transformer encoder whose attention mechanism and width are searched (plugin example)."""

    name = "mechanism-width"
    Config = MechanismWidthConfig
    task_kinds = ("sequence",)

    def sample(self, rng: random.Random) -> Arch:
        """A mechanism and a width drawn uniformly."""
        o = self.options
        return self.arch({"mechanism": rng.choice(list(o.candidates)), "dim": rng.choice(list(o.dims))})

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        """Another mechanism or another width (whichever has an alternative)."""
        o = self.options
        keys = [k for k, values in (("mechanism", o.candidates), ("dim", o.dims)) if len(values) > 1]
        if not keys:
            raise ArchError("mutate: a space of one architecture has no neighbours")
        key = rng.choice(keys)
        values = o.candidates if key == "mechanism" else o.dims
        choices = dict(arch.choices)
        choices[key] = rng.choice([v for v in values if v != choices[key]])
        return self.arch(choices)

    def validate(self, arch: Arch) -> None:
        """Raise :class:`~attnas.core.errors.ArchError` naming the first bad choice."""
        super().validate(arch)
        if set(arch.choices) != {"mechanism", "dim"}:
            raise ArchError(f"choices must have exactly the keys 'mechanism' and 'dim', got {sorted(arch.choices)}")
        if arch.choices["mechanism"] not in self.options.candidates:
            raise ArchError(f"choices.mechanism: {arch.choices['mechanism']!r} is not one of "
                            f"{', '.join(self.options.candidates)}")
        if arch.choices["dim"] not in self.options.dims:
            raise ArchError(f"choices.dim: {arch.choices['dim']!r} is not one of {list(self.options.dims)}")

    def size(self) -> int:
        """Mechanisms times widths."""
        return len(self.options.candidates) * len(self.options.dims)

    def describe(self, arch: Arch) -> str:
        """E.g. ``cosine x4 heads, width 64``."""
        return f"{arch.choices['mechanism']} x{self.options.heads} heads, width {arch.choices['dim']}"

    def build(self, arch: Arch, task: Any) -> nn.Module:
        """The encoder classifier of ``arch`` for a token-sequence task (``forward(batch)``)."""
        self.validate(arch)
        extra = task.info.extra
        o = self.options
        return TransformerEncoderClassifier(
            extra["vocab_size"], task.info.num_classes, mechanism=arch.choices["mechanism"], dim=arch.choices["dim"],
            depth=o.depth, heads=o.heads, max_len=extra["max_len"], dropout=o.dropout, pad_id=extra.get("pad_id", 0))
