"""The stage-wise full-attention search space (Zhou et al., 2021, Sec. III.A-B, Tables I and II).

Zhou et al., *Full-attention based Neural Architecture Search using Context
Auto-regression* (2021): a fixed ``Local SA_k3_h8`` stem, five stages of three searchable
layers (``16, 32, 32, 64, 64`` channels times ``init_channels / 16``; the first layer of
stages 2 and 4 has stride 2), global average pooling and a linear classifier. Every
searchable layer picks one of the seven blocks of Table II, so the space holds
``7**15`` architectures (Sec. III.A).

Architecture layout (``Arch.choices``)::

    {"layers": ["local_sa_k7_h8", "non_local_sa", ...]}   # 15 names

``layers[3*s + i]`` is layer ``i`` (0-2) of stage ``s + 1`` (1-5). Valid names are
:data:`~attnas.ops.fullattn.self_attention_block.CANDIDATES`: ``local_sa_k{3,5,7}_h{4,8}`` and
``non_local_sa``. The stem is fixed and not part of the choices.

Ablation without the stage-wise space (Table VII, ``shared_stages: true``): stages 1, 3
and 5 share one three-layer structure and stages 2 and 4 another (Fig. 5(b)). The
choices keep all 15 names (so every architecture builds the same way) but must repeat
the shared structure; the space then holds ``7**6`` architectures and the relaxation has
six rows of ``alpha``.

Capabilities: ``relaxed`` (:meth:`StagewiseSpace.relaxed` / :meth:`derive`, DARTS Eq. 1
with ``alpha`` initialised to zero) and ``dag`` (:meth:`to_dag`: the chain of blocks).
The relaxed network's ``features(x)`` is the encoder of the context auto-regression
(Sec. III.C), so the same ``alpha`` serves the search and fine-tuning phases.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import numpy as np
from torch import nn

from attnas.config import CheckedConfig, PositiveInt
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError, UnsupportedError, unknown_name
from attnas.registry import register_space
from attnas.models.stagewise_network import (
    LAYERS_PER_STAGE,
    NUM_LAYERS,
    STAGE_WIDTHS,
    STEM_OP,
    RelaxedStagewiseNetwork,
    StagewiseNetwork,
)
from attnas.ops.fullattn.self_attention_block import CANDIDATES, PAPER_LABELS
from attnas.spaces.base import Baseline, Space

__all__ = ["StagewiseConfig", "StagewiseSpace"]

_SHARED_STAGE_PATTERN = (0, 1, 0, 1, 0)  # stage -> shared structure (stages 1,3,5 / 2,4)


@dataclass(frozen=True)
class StagewiseConfig(CheckedConfig):
    """Options of the stage-wise space.

    Attributes:
        init_channels: Channels of the stem and stage 1; stages have 1, 2, 2, 4, 4 times
            as many (Table I: 16; the paper's final networks use 80 or 96).
        reduction: Bottleneck ratio: a block's attention width is its output channels
            divided by this (not stated in the paper; 2 matches its parameter counts best).
        batch_norm: BatchNorm after each layer of a block, as in the ResNet bottleneck the
            paper's blocks are modelled on (see :mod:`attnas.ops.fullattn.self_attention_block`);
            ``false`` gives the layers exactly as the text lists them.
        shared_stages: Table VII ablation: stages 1, 3, 5 share one structure and 2, 4
            another.
        final_channels: ``init_channels`` of the discrete networks :meth:`StagewiseSpace.build`
            makes (the retrained architecture), when it differs from the searched relaxation's
            (the paper searches with 16 and trains the final networks with 80 or 96); null:
            ``init_channels``.
    """

    init_channels: PositiveInt = 16
    reduction: PositiveInt = 2
    batch_norm: bool = True
    shared_stages: bool = False
    final_channels: Optional[PositiveInt] = None

    field_prefix = "space."
    retired_keys: ClassVar[dict[str, str]] = {
        "impl": "which local-attention kernel runs is chosen by ATTNAS_NO_KERNELS / ATTNAS_DISABLE_KERNELS"}

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("init_channels", "final_channels"):
            c = getattr(self, name)
            if c is None:
                continue
            if c % self.reduction or (c // self.reduction) % 8:
                raise ConfigError(
                    f"space.{name}={c} / reduction={self.reduction} must be a whole multiple of 8 (the "
                    f"attention width must split into 8 heads); e.g. 16, 32, 48, 80 or 96 with reduction=2"
                )


def _task_dims(task: Any) -> tuple[int, int]:
    """``(image channels, classes)`` from ``task.info``."""
    info = getattr(task, "info", None)
    if info is None:
        raise ConfigError(f"the stagewise space needs a task with an 'info' attribute, got {type(task).__name__}")
    in_dim, num_classes = int(info.in_dim), int(info.num_classes)
    if in_dim < 1 or num_classes < 1:
        raise ConfigError(f"the stagewise space needs image channels and classes >= 1, got {in_dim} and {num_classes}")
    return in_dim, num_classes


@register_space("stagewise")
class StagewiseSpace(Space):
    """Stage-wise full-attention search space (Zhou et al., 2021, Table I; 7^15 architectures)."""

    name: ClassVar[str] = "stagewise"
    Config: ClassVar[type] = StagewiseConfig
    capabilities: ClassVar[frozenset[str]] = frozenset({"relaxed", "dag"})
    task_kinds = ("image",)

    def __init__(self, options: StagewiseConfig | None = None):
        super().__init__(options)
        opts = self.options
        if opts.shared_stages:
            self.layer_groups = tuple(
                _SHARED_STAGE_PATTERN[s] * LAYERS_PER_STAGE + i
                for s in range(len(STAGE_WIDTHS)) for i in range(LAYERS_PER_STAGE)
            )
        else:
            self.layer_groups = tuple(range(NUM_LAYERS))
        self.num_groups = max(self.layer_groups) + 1

    # -- the architecture distribution ----------------------------------------------------------

    def _expand(self, group_ops: list[str]) -> Arch:
        return self.arch({"layers": [group_ops[g] for g in self.layer_groups]})

    def _group_ops(self, arch: Arch) -> list[str]:
        ops = arch.choices["layers"]
        out: list[str | None] = [None] * self.num_groups
        for op, g in zip(ops, self.layer_groups):
            out[g] = op if out[g] is None else out[g]
        return out  # type: ignore[return-value]

    def sample(self, rng: random.Random) -> Arch:
        """A uniformly random architecture."""
        return self._expand([rng.choice(CANDIDATES) for _ in range(self.num_groups)])

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        """Change the operation of one searchable layer (or one shared position)."""
        self.validate(arch)
        group_ops = self._group_ops(arch)
        g = rng.randrange(self.num_groups)
        group_ops[g] = rng.choice([c for c in CANDIDATES if c != group_ops[g]])
        return self._expand(group_ops)

    def validate(self, arch: Arch) -> None:
        """Raise :class:`ArchError` naming the first problem of ``arch``."""
        super().validate(arch)
        choices = arch.choices
        for key in choices:
            if key != "layers":
                raise ArchError(f"stagewise: unknown key '{key}' in choices; the only key is 'layers'")
        if "layers" not in choices:
            raise ArchError("stagewise: choices need a 'layers' list of 15 operation names")
        ops = choices["layers"]
        if not isinstance(ops, list) or len(ops) != NUM_LAYERS:
            got = f"{len(ops)} entries" if isinstance(ops, list) else type(ops).__name__
            raise ArchError(
                f"stagewise: 'layers' must list {NUM_LAYERS} operations (5 stages x {LAYERS_PER_STAGE} layers), got {got}"
            )
        for i, op in enumerate(ops):
            if op not in CANDIDATES:
                stage, layer = divmod(i, LAYERS_PER_STAGE)
                raise ArchError(
                    f"stagewise: layers[{i}] (stage {stage + 1}, layer {layer + 1}): "
                    + unknown_name("operation", str(op), CANDIDATES)
                )
        if self.options.shared_stages:
            first: dict[int, int] = {}
            for i, g in enumerate(self.layer_groups):
                if g in first and ops[i] != ops[first[g]]:
                    raise ArchError(
                        f"stagewise (shared_stages): layers[{i}] is '{ops[i]}' but must equal layers[{first[g]}] "
                        f"'{ops[first[g]]}' (stages 1, 3, 5 share one structure and stages 2, 4 another)"
                    )
                first.setdefault(g, i)

    def size(self) -> int:
        """``7**15`` (``7**6`` with shared stages)."""
        return len(CANDIDATES) ** self.num_groups

    # -- networks ----------------------------------------------------------------------------------

    def _block_options(self) -> dict[str, Any]:
        o = self.options
        return {"reduction": o.reduction, "batch_norm": o.batch_norm}

    def build(self, arch: Arch, task: Any) -> nn.Module:
        """A :class:`~attnas.models.stagewise_network.StagewiseNetwork` for ``arch``.

        Its width is ``final_channels`` when set, else ``init_channels``.
        """
        self.validate(arch)
        in_dim, num_classes = _task_dims(task)
        o = self.options
        width = o.final_channels if o.final_channels is not None else o.init_channels
        return StagewiseNetwork(arch.choices["layers"], in_dim, num_classes, width, **self._block_options())

    def relaxed(self, task: Any) -> RelaxedStagewiseNetwork:
        """The DARTS relaxation (Eq. 1) with ``alpha`` initialised to zero."""
        in_dim, num_classes = _task_dims(task)
        return RelaxedStagewiseNetwork(in_dim, num_classes, self.options.init_channels,
                                       layer_groups=self.layer_groups, **self._block_options())

    def derive(self, relaxed: nn.Module) -> Arch:
        """The argmax architecture of a relaxed network (Sec. III.B)."""
        if not isinstance(relaxed, RelaxedStagewiseNetwork):
            raise UnsupportedError(f"stagewise.derive needs a RelaxedStagewiseNetwork, got {type(relaxed).__name__}")
        if tuple(relaxed.layer_groups) != self.layer_groups:
            raise ArchError("stagewise.derive: the relaxed network's layer sharing does not match this space's options")
        arch = self.arch({"layers": relaxed.derive_ops()}, derived_from="argmax of alpha")
        self.validate(arch)
        return arch

    def alpha_arch(self, choice: list[int]) -> Arch:
        """The architecture with candidate ``choice[g]`` in every layer of group ``g`` (the rows of ``alpha``)."""
        if len(choice) != self.num_groups:
            raise ArchError(f"expected one column per layer group ({self.num_groups}), got {len(choice)}")
        return self._expand([CANDIDATES[i] for i in choice])

    def to_dag(self, arch: Arch) -> tuple[np.ndarray, list[str]]:
        """The chain ``input -> stem -> 15 blocks -> output`` as ``(adjacency, labels)``.

        Labels are operation names; the stem is labelled ``local_sa_k3_h8`` (its fixed
        operation). Residual shortcuts live inside each block, so the macro graph is a chain.
        """
        self.validate(arch)
        labels = ["input", STEM_OP, *arch.choices["layers"], "output"]
        n = len(labels)
        adj = np.zeros((n, n), dtype=np.int64)
        adj[np.arange(n - 1), np.arange(1, n)] = 1
        return adj, labels

    def baselines(self) -> dict[str, Baseline]:
        """The all-local network of the paper's tables: every searchable layer stand-alone
        local self-attention ``local_sa_k7_h8`` (Ramachandran et al. 2019), same macro-architecture."""
        return {"local_sa": Baseline({"layers": ["local_sa_k7_h8"] * NUM_LAYERS}, None,
                                     f"every one of the {NUM_LAYERS} layers Local SA_k7_h8")}

    def describe(self, arch: Arch) -> str:
        """One line per stage with the paper's operation names."""
        self.validate(arch)
        ops = arch.choices["layers"]
        lines = [f"stem: {PAPER_LABELS[STEM_OP]}"]
        for s in range(len(STAGE_WIDTHS)):
            names = ", ".join(PAPER_LABELS[op] for op in ops[s * LAYERS_PER_STAGE:(s + 1) * LAYERS_PER_STAGE])
            lines.append(f"stage {s + 1}: {names}")
        return "\n".join(lines)
