"""A CIFAR ResNet carrying one plug-in attention module in every residual block.

The hand-designed baselines of AutoLA's Tables 1, 2 and 6 (Ma et al., NeurIPS 2020): the plain
backbone, ``+ SE`` (Hu et al., 2018; AutoLA Eq. 4) and ``+ CBAM`` (Woo et al., 2018; Eq. 8),
trained in the same harness as the searched HOGA cell (:mod:`attnas.spaces.hoga`). The module
sits where the HOGA cell sits: on the residual branch, before the shortcut is added.

The HOGA space cannot express these (even with one group, a HOGA cell adds its
concatenate-and-project ``phi``, Eq. 3), hence this small space. HOG_SE / HOG_CBAM (a HOGA
cell with SE / CBAM on every edge, Table 6) and random HOGA cells are architectures of the
``hoga`` space.

Choices layout (``Arch.choices``)::

    {"attention": "se"}        # "none", or an operation of the "hoga" pool

The space is small: one architecture per entry of ``modules``; ``fixed`` is its strategy.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from torch import nn

from attnas import registry
from attnas.config import CheckedConfig, PositiveInt
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError, did_you_mean
from attnas.models.image_classifier import ImageClassifier
from attnas.models.resnet_cifar import cifar_resnet
from attnas.ops.autola.attention_modules import POOL, create_attention
from attnas.registry import register_space
from attnas.spaces.base import Space

NONE = "none"


@dataclass(frozen=True)
class ResNetAttentionConfig(CheckedConfig):
    """Options of the ``resnet-attention`` space.

    Attributes:
        backbone: The CIFAR ResNet (as in the ``hoga`` space).
        width: First-stage channels.
        modules: The modules an architecture may choose: ``none`` or operations of the
            ``hoga`` pool (``se``, ``cbam``, ``channel_v2``, ...).
        reduction: Reduction ratio of the channel-attention MLP (16 in SE and CBAM).
    """

    backbone: Literal["resnet20", "resnet32", "resnet56", "resnet110", "resnet29b", "resnet56b"] = "resnet20"
    width: PositiveInt = 16
    modules: tuple[str, ...] = (NONE, "se", "cbam")
    reduction: PositiveInt = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "modules", tuple(self.modules))
        super().__post_init__()
        if not self.modules:
            raise ConfigError("modules: the list is empty")
        bad = [m for m in self.modules if m != NONE and not registry.is_registered("op", m, POOL)]
        if bad:
            known = [NONE, *registry.names("op", POOL)]
            raise ConfigError("modules: unknown module " + ", ".join(f"'{m}'{did_you_mean(m, known)}" for m in bad)
                              + f"; valid: {', '.join(known)}")
        dup = sorted({m for m in self.modules if self.modules.count(m) > 1})
        if dup:
            raise ConfigError(f"modules: listed more than once: {', '.join(dup)}")


@register_space("resnet-attention")
class ResNetAttentionSpace(Space):
    """A CIFAR ResNet with one plug-in attention module (none, SE, CBAM...) per block (the baselines)."""

    name = "resnet-attention"
    Config = ResNetAttentionConfig
    capabilities = frozenset()
    task_kinds = ("image",)

    def sample(self, rng: random.Random) -> Arch:
        """A module drawn uniformly from ``modules``."""
        return self.arch({"attention": rng.choice(self.options.modules)})

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        """Another module of ``modules``."""
        self.validate(arch)
        others = [m for m in self.options.modules if m != arch.choices["attention"]]
        if not others:
            raise ArchError("cannot mutate: the space has a single module")
        return self.arch({"attention": rng.choice(others)})

    def validate(self, arch: Arch) -> None:
        """Check the layout and the module name."""
        super().validate(arch)
        ch = arch.choices
        extra = [k for k in ch if k != "attention"]
        if extra:
            raise ArchError(f"choices: unknown key '{extra[0]}'; valid keys: attention")
        if "attention" not in ch:
            raise ArchError("choices: missing key 'attention'")
        name = ch["attention"]
        if name not in self.options.modules:
            raise ArchError(f"choices.attention: '{name}' is not one of this space's modules"
                            f"{did_you_mean(str(name), self.options.modules)}; valid: {', '.join(self.options.modules)}")

    def size(self) -> int:
        return len(self.options.modules)

    def attention_factory(self, arch: Arch):
        """A ``channels -> module`` factory (``None`` for the plain backbone)."""
        self.validate(arch)
        name = arch.choices["attention"]
        if name == NONE:
            return None
        reduction = self.options.reduction
        return lambda channels: create_attention(name, channels, reduction)

    def build(self, arch: Arch, task: Any) -> nn.Module:
        """The backbone with the chosen module in every residual block."""
        o, info = self.options, task.info
        return ImageClassifier(cifar_resnet(o.backbone, info.num_classes, info.in_dim, o.width,
                                            self.attention_factory(arch)))

    def describe(self, arch: Arch) -> str:
        self.validate(arch)
        name = arch.choices["attention"]
        o = self.options
        if name == NONE:
            return f"{o.backbone} (width {o.width}), no attention"
        return f"{o.backbone} (width {o.width}) + {name} in every block (reduction {o.reduction})"
