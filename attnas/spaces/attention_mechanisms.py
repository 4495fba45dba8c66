"""The attention-mechanism space of DARTFormer (Brown et al. 2022, Sec. 3.2-3.3).

An architecture is a Transformer encoder classifier (Long Range Arena layout: embedding
plus positions, ``depth`` encoder layers, pooling, linear classifier) whose attention is
either one mechanism in every layer (the *homogeneous* models of Sec. 3.3.1), a searched
per-head mix stacked as a cell in every layer (the *heterogeneous* models of Sec. 3.3.2), or
one choice per layer (a *hybrid*, e.g. a softmax layer among linear-cost ones).
The candidates are the attention blocks of :mod:`attnas.ops.attention_mechanisms`.

``choices`` layout::

    {"mechanism": "softmax"}                      # homogeneous: `heads` heads of one mechanism
    {"mechanism": {"softmax": 2, "local": 2}}     # heterogeneous: single-head blocks per mechanism
    {"mechanism": ["softmax", "linear"]}          # per-layer hybrid: one entry (name or cell) per layer

A heterogeneous cell has exactly ``heads`` single heads in total (``head_dim = dim /
heads``), each a complete single-head block with its own projections, averaged like the
search supernet (Sec. 3.2: per-head blocks concatenated and projected equal the sum of
per-head output projections). A per-layer list has exactly ``depth`` entries. Mechanisms
must be among the space's ``candidates``. ``layout`` says what :meth:`~AttentionMechanismSpace.sample`
draws: ``homogeneous`` (default) one mechanism for every layer, ``heterogeneous`` a cell of
``heads`` single heads (uniform over the multisets of candidates: the architectures a NAS
One-shot or NAS Prune search returns), ``per-layer`` one mechanism per layer,
independently and uniformly.

Capabilities: ``mechanism-supernet`` — :meth:`AttentionMechanismSpace.supernet` builds the
fixed-alpha search network of Sec. 3.1 (one encoder layer whose attention averages a
block per candidate, or ``heads`` single-head blocks per candidate), driven by the
``mechanism-search`` strategy; ``dag`` — :meth:`~AttentionMechanismSpace.to_dag` draws the
attention cell. Models from :meth:`~AttentionMechanismSpace.build` are ordinary
:class:`~attnas.models.transformer_encoder.TransformerEncoderClassifier` modules.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from torch import nn

from attnas import registry
from attnas.config import CheckedConfig, Fraction, NonNegativeInt, PositiveInt
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError, unknown_name
from attnas.models.mechanism_supernet import DEFAULT_CANDIDATES, MechanismSupernet
from attnas.models.transformer_encoder import TransformerEncoderClassifier
from attnas.ops.attention_mechanisms import mechanism_names
from attnas.registry import register_space
from attnas.spaces.base import Baseline, Space


def _mechanism_class(name: str) -> type:
    from attnas import registry

    return registry.get("op", name, group="mechanism")


@dataclass(frozen=True)
class AttentionMechanismsConfig(CheckedConfig):
    """Options of the attention-mechanism space (defaults: LRA ListOps model sizes).

    Long Range Arena's ListOps models (Tay et al. 2021, ``base_listops_config``) have
    embedding and QKV size 512, 8 heads, 6 layers, MLP size 2048 and ``[CLS]`` pooling.

    Attributes:
        candidates: Mechanisms of the space (and blocks of the search supernet), in order.
        dim: Model dimension ``D``.
        depth: Encoder layers of a built model (the search supernet has one, Sec. 3.2).
        heads: Heads per layer: of each homogeneous block, and the total of single heads
            of a heterogeneous cell (``H`` of Sec. 3.3.2).
        ffn_dim: FFN hidden size (0: ``4 * dim``).
        dropout: Dropout rate of the encoder.
        norm: ``pre`` (LRA) or ``post`` LayerNorm.
        pool: ``cls`` (LRA's ListOps setting) or ``mean`` over real tokens; a per-token
            task (``info.extra["per_token"]``, e.g. ``mqar``) gets a per-token head instead.
        positions: ``sinusoidal`` or ``learned`` position embeddings.
        mechanism_options: ``{mechanism: {option: value}}``, e.g. ``{local: {window: 8}}``
            for short sequences (see ``docs/attention_mechanisms.md`` for every option).
        supernet_depth: Encoder layers of the search supernet (DARTFormer: 1; a task such
            as associative recall, which no one-layer model solves, needs 2).
        layout: What :meth:`AttentionMechanismSpace.sample` draws and
            :meth:`~AttentionMechanismSpace.mutate` keeps: ``homogeneous`` (one mechanism
            in every layer), ``heterogeneous`` (a cell of ``heads`` single heads stacked in
            every layer, uniform over the multisets: DARTFormer's heterogeneous models,
            Sec. 3.3.2) or ``per-layer`` (a list of ``depth`` mechanisms, drawn
            independently: the hybrids of a per-layer search).
    """

    candidates: tuple[str, ...] = DEFAULT_CANDIDATES
    dim: PositiveInt = 512
    depth: PositiveInt = 6
    heads: PositiveInt = 8
    ffn_dim: NonNegativeInt = 2048
    dropout: Fraction = 0.1
    norm: Literal["pre", "post"] = "pre"
    pool: Literal["mean", "cls"] = "cls"
    positions: Literal["sinusoidal", "learned"] = "sinusoidal"
    mechanism_options: dict[str, Any] = field(default_factory=dict)
    supernet_depth: PositiveInt = 1
    layout: Literal["homogeneous", "heterogeneous", "per-layer"] = "homogeneous"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.candidates:
            raise ConfigError("candidates: the space needs at least one mechanism")
        for name in self.candidates:
            if not registry.is_registered("op", name, group="mechanism"):
                raise ConfigError("candidates: " + unknown_name("attention mechanism", name, mechanism_names()))
        dup = sorted({n for n in self.candidates if self.candidates.count(n) > 1})
        if dup:
            raise ConfigError(f"candidates: {', '.join(dup)} listed more than once")
        if self.dim % self.heads:
            raise ConfigError(f"dim: {self.dim} is not divisible by heads {self.heads}")
        for mech, opts in self.mechanism_options.items():
            if not registry.is_registered("op", mech, group="mechanism"):
                raise ConfigError("mechanism_options: " + unknown_name("attention mechanism", mech, mechanism_names()))
            if not isinstance(opts, dict):
                raise ConfigError(f"mechanism_options.{mech}: expected a mapping of options, got {opts!r}")
            allowed = _mechanism_class(mech).option_names()
            for key in opts:
                if key not in allowed:
                    raise ConfigError(
                        f"mechanism_options.{mech}.{key}: unknown option; valid: {', '.join(sorted(allowed))}"
                    )


@register_space("attention-mechanisms")
class AttentionMechanismSpace(Space):
    """DARTFormer's attention mechanisms: homogeneous encoders or searched per-head cells."""

    name = "attention-mechanisms"
    Config = AttentionMechanismsConfig
    capabilities = frozenset({"mechanism-supernet", "dag"})
    task_kinds = ("sequence",)

    # -- the architectures -------------------------------------------------------------------------

    def validate(self, arch: Arch) -> None:
        super().validate(arch)
        o = self.options
        choices = arch.choices
        extra = sorted(set(choices) - {"mechanism"})
        if extra:
            raise ArchError(f"choices.{extra[0]}: unknown key; the only key is 'mechanism'")
        if "mechanism" not in choices:
            raise ArchError("choices.mechanism: required key is missing")
        spec = choices["mechanism"]
        if isinstance(spec, list):
            if len(spec) != o.depth:
                raise ArchError(f"choices.mechanism: a per-layer list needs {o.depth} entries (space depth), "
                                f"got {len(spec)}")
            for i, layer in enumerate(spec):
                self._check_layer(layer, f"choices.mechanism[{i}]")
            return
        self._check_layer(spec, "choices.mechanism")

    def _check_layer(self, spec: Any, where: str) -> None:
        """Check one layer's attention: a mechanism name or a ``{mechanism: heads}`` cell."""
        if isinstance(spec, str):
            self._check_mechanism(spec, where)
            return
        if not isinstance(spec, dict) or not spec:
            raise ArchError(f"{where}: expected a mechanism name or a {{mechanism: heads}} mapping (or, for "
                            f"choices.mechanism, a per-layer list of them), got {spec!r}")
        for mech, n in spec.items():
            self._check_mechanism(mech, f"{where}.{mech}")
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ArchError(f"{where}.{mech}: heads must be a positive integer, got {n!r}")
        total = sum(spec.values())
        heads = self.options.heads
        if total != heads:
            raise ArchError(f"{where}: the cell has {total} single heads but the space has "
                            f"heads={heads}; the counts must add up to {heads}")

    def _check_mechanism(self, name: Any, where: str) -> None:
        if not isinstance(name, str):
            raise ArchError(f"{where}: expected a mechanism name, got {name!r}")
        if name not in self.options.candidates:
            known = mechanism_names()
            if name in known:
                raise ArchError(f"{where}: '{name}' is not a candidate of this space; candidates: "
                                f"{', '.join(self.options.candidates)}")
            raise ArchError(f"{where}: " + unknown_name("attention mechanism", name, known))

    def sample(self, rng: random.Random) -> Arch:
        """A uniformly drawn candidate in every layer (``layout: homogeneous``), a uniformly
        drawn cell (``heterogeneous``) or a candidate in each layer independently
        (``per-layer``: a list of ``depth`` names)."""
        cands = list(self.options.candidates)
        if self.options.layout == "per-layer":
            return self.arch({"mechanism": [rng.choice(cands) for _ in range(self.options.depth)]})
        if self.options.layout == "heterogeneous":
            return self.arch({"mechanism": self._sample_cell(cands, rng)})
        return self.arch({"mechanism": rng.choice(cands)})

    def _sample_cell(self, cands: list[str], rng: random.Random) -> dict[str, int]:
        """A multiset of ``heads`` candidates, each of the ``C(c + h - 1, h)`` equally likely.

        Stars and bars: ``h`` of the ``c + h - 1`` slots hold heads, the other ``c - 1``
        are the bars between candidates, so a uniform ``h``-subset of the slots is a
        uniform multiset; the heads before the first bar are the first candidate's, and so on.
        """
        h = self.options.heads
        bars = sorted(set(range(len(cands) + h - 1)) - set(rng.sample(range(len(cands) + h - 1), h)))
        counts, prev = [], -1
        for b in [*bars, len(cands) + h - 1]:
            counts.append(b - prev - 1)
            prev = b
        return {c: n for c, n in zip(cands, counts) if n}

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        """Another mechanism (homogeneous), one layer's mechanism changed (per-layer list of
        names), or one head moved to another mechanism (cell)."""
        cands = list(self.options.candidates)
        if len(cands) < 2:
            raise ArchError("mutate: a space with one candidate has no neighbours")
        spec = arch.choices["mechanism"]
        if isinstance(spec, str):
            return self.arch({"mechanism": rng.choice([c for c in cands if c != spec])})
        if isinstance(spec, list):
            if not all(isinstance(m, str) for m in spec):
                raise ArchError("mutate: per-layer lists of cells have no neighbours here; use mechanism names")
            layers = list(spec)
            i = rng.randrange(len(layers))
            layers[i] = rng.choice([c for c in cands if c != layers[i]])
            return self.arch({"mechanism": layers})
        counts = dict(spec)
        src = rng.choice(sorted(counts))
        dst = rng.choice([c for c in cands if c != src])
        counts[src] -= 1
        counts[dst] = counts.get(dst, 0) + 1
        return self.arch({"mechanism": {c: counts[c] for c in cands if counts.get(c)}})

    def size(self) -> int:
        """Homogeneous models plus heterogeneous cells (multisets of ``heads`` heads); with
        ``layout: heterogeneous`` the cells alone, with ``per-layer`` the lists of ``depth``
        mechanism names (``c ** depth``, those with one mechanism throughout included)."""
        c, h = len(self.options.candidates), self.options.heads
        if self.options.layout == "per-layer":
            return c ** self.options.depth
        if self.options.layout == "heterogeneous":
            return math.comb(c + h - 1, h)
        return c + math.comb(c + h - 1, h)

    def baselines(self) -> dict[str, Baseline]:
        """Every candidate mechanism in every layer (the homogeneous models of DARTFormer's tables)."""
        return {m: Baseline({"mechanism": m}, None, f"{m} attention in every layer")
                for m in self.options.candidates}

    def describe(self, arch: Arch) -> str:
        spec = arch.choices["mechanism"]
        o = self.options
        if isinstance(spec, list):
            return " | ".join(self._describe_layer(s) for s in spec) + f" (per layer), dim {o.dim}"
        return f"{self._describe_layer(spec)}, {o.depth} layers, dim {o.dim}"

    def _describe_layer(self, spec: Any) -> str:
        if isinstance(spec, str):
            return f"{spec} x{self.options.heads} heads"
        return " + ".join(f"{m} x{n}" for m, n in spec.items()) + " (single-head cell)"

    def to_dag(self, arch: Arch) -> tuple[np.ndarray, list[str]]:
        """The attention cell: input, one node per head's mechanism, the merge, output (a
        per-layer list: input, one node per layer's attention, output, in a chain)."""
        spec = arch.choices["mechanism"]
        if isinstance(spec, list):
            labels = ["input", *(s if isinstance(s, str) else "+".join(s) for s in spec), "output"]
            n = len(labels)
            return np.eye(n, k=1, dtype=np.int64), labels
        heads = [spec] * self.options.heads if isinstance(spec, str) else [m for m, n in spec.items()
                                                                            for _ in range(n)]
        labels = ["input", *heads, "concat+W_O" if isinstance(spec, str) else "mean", "output"]
        n = len(labels)
        adj = np.zeros((n, n), dtype=np.int64)
        merge = n - 2
        for i in range(1, merge):
            adj[0, i] = 1
            adj[i, merge] = 1
        adj[merge, n - 1] = 1
        return adj, labels

    # -- networks ----------------------------------------------------------------------------------

    def _sequence_info(self, task: Any) -> dict:
        info = task.info
        if info.kind != "sequence":
            raise ConfigError(f"space '{self.name}' needs a token-sequence task (e.g. sequence-classification), "
                              f"got a '{info.kind}' task")
        return info.extra

    def _pool(self, extra: dict) -> str:
        """``token`` (a prediction per position) for a per-token task such as ``mqar``, else the option."""
        return "token" if extra.get("per_token") else self.options.pool

    def _options_for(self, mechanisms: list[str]) -> dict:
        return {m: dict(o) for m, o in self.options.mechanism_options.items() if m in mechanisms}

    def build(self, arch: Arch, task: Any) -> nn.Module:
        """The ordinary Transformer encoder classifier of ``arch`` on ``task``."""
        self.validate(arch)
        extra = self._sequence_info(task)
        o = self.options
        spec = arch.choices["mechanism"]
        layers = spec if isinstance(spec, list) else [spec]
        mechs = sorted({m for layer in layers for m in ([layer] if isinstance(layer, str) else layer)})
        return TransformerEncoderClassifier(
            extra["vocab_size"], task.info.num_classes, mechanism=spec if isinstance(spec, (str, list)) else dict(spec),
            dim=o.dim, depth=o.depth, heads=o.heads, ffn_dim=o.ffn_dim or None, max_len=extra["max_len"],
            dropout=o.dropout, norm=o.norm, pool=self._pool(extra), positions=o.positions, pad_id=extra.get("pad_id", 0),
            mechanism_options=self._options_for(mechs))

    def supernet(self, task: Any, mode: Literal["homogeneous", "heterogeneous"] = "homogeneous") -> nn.Module:
        """The fixed-alpha search network of Sec. 3.1-3.2 over every candidate.

        Args:
            task: A token-sequence task.
            mode: ``homogeneous`` (one ``heads``-head block per candidate, Sec. 3.3.1) or
                ``heterogeneous`` (``heads`` single-head blocks per candidate, Sec. 3.3.2).

        Returns:
            A :class:`~attnas.models.mechanism_supernet.MechanismSupernet` (``forward(batch)``).
        """
        extra = self._sequence_info(task)
        o = self.options
        return MechanismSupernet(
            extra["vocab_size"], task.info.num_classes, mechanisms=o.candidates, mode=mode, dim=o.dim,
            heads=o.heads, ffn_dim=o.ffn_dim or None, max_len=extra["max_len"], dropout=o.dropout, norm=o.norm,
            pool=self._pool(extra), positions=o.positions, pad_id=extra.get("pad_id", 0),
            mechanism_options=self._options_for(list(o.candidates)), depth=o.supernet_depth)

    def arch_from_kept(self, kept: Any) -> Arch:
        """The architecture of a pruned supernet's ``kept()`` (a name or ``{mechanism: heads}``)."""
        if isinstance(kept, str):
            return self.arch({"mechanism": kept})
        return self.arch({"mechanism": {m: int(kept[m]) for m in self.options.candidates if kept.get(m)}})
