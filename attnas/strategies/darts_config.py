"""Options of ``darts`` (:mod:`attnas.strategies.darts`) and of the searches built on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

from attnas.config import CheckedConfig, Fraction, NonNegativeFloat, PositiveFloat, PositiveInt
from attnas.core.errors import ConfigError


@dataclass(frozen=True)
class CostTermConfig(CheckedConfig):
    """The expected-cost term of the architecture step (``strategy.cost``; off by default).

    The architecture loss becomes ``task loss + weight * (E[cost] - min) / (max - min)``:
    ``E[cost]`` is the cost of the network averaged over ``softmax(alpha)`` from
    per-operation costs measured once (:mod:`attnas.strategies.darts_cost`), ``min`` and
    ``max`` the cheapest and the costliest architecture's, so ``weight`` is the task loss
    traded for going from the cheapest to the costliest architecture.

    Attributes:
        name: The cost: ``params`` or ``macs`` (both add up over operations).
        weight: Its weight (0: no term, nothing measured).
        batch_size: Size of the example batch the MACs are counted on.
    """

    name: Literal["params", "macs"] = "params"
    weight: NonNegativeFloat = 0.0
    batch_size: PositiveInt = 1

    field_prefix = "cost."


@dataclass(frozen=True)
class DartsConfig(CheckedConfig):
    """Options of ``darts`` (defaults: AutoLA Sec. 4.2 and DARTS).

    Attributes:
        epochs: Search epochs (one epoch = one pass over the weight split; 100 in AutoLA).
        batch_size: Mini-batch size of both steps (128 in AutoLA).
        lr: Initial learning rate of the weights (SGD, cosine-annealed).
        lr_min: Final learning rate of the cosine schedule.
        momentum: SGD momentum.
        weight_decay: SGD weight decay.
        grad_clip: Max norm of the weight gradient (0: no clipping; DARTS clips at 5).
        arch_lr: Adam learning rate of ``alpha``.
        arch_betas: Adam betas of ``alpha``.
        arch_weight_decay: Adam weight decay of ``alpha``.
        alpha_init: ``space`` keeps the space's initialisation (HOGA: ``N(0, 1) * 1e-3``);
            ``normal`` draws ``N(0, 1) * alpha_init_scale``; ``zeros`` starts from uniform
            mixing.
        alpha_init_scale: Scale of the ``normal`` initialisation.
        alpha_from: A run directory whose ``alpha`` starts this search (overrides
            ``alpha_init``); empty: none.
        alpha_from_tag: The checkpoint tag in ``alpha_from`` that holds ``alpha``.
        splits: ``[weight_split, arch_split]``; null: the task's ``bilevel_splits``.
        eval_split: Split the relaxed network is scored on after each epoch (empty: never).
        checkpoint_every: Epochs between checkpoints.
        cost: The expected-cost term of the architecture step (:class:`CostTermConfig`).
    """

    epochs: PositiveInt = 100
    batch_size: PositiveInt = 128
    lr: PositiveFloat = 0.025
    lr_min: NonNegativeFloat = 0.001
    momentum: NonNegativeFloat = 0.9
    weight_decay: NonNegativeFloat = 3e-4
    grad_clip: NonNegativeFloat = 5.0
    arch_lr: PositiveFloat = 3e-4
    arch_betas: tuple[Fraction, ...] = (0.5, 0.999)
    arch_weight_decay: NonNegativeFloat = 1e-3
    alpha_init: Literal["space", "normal", "zeros"] = "space"
    alpha_init_scale: NonNegativeFloat = 1e-3
    alpha_from: str = ""
    alpha_from_tag: str = "darts"
    splits: Optional[tuple[str, ...]] = None
    eval_split: str = "val"
    checkpoint_every: PositiveInt = 1
    cost: CostTermConfig = field(default_factory=CostTermConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.lr_min <= self.lr:
            raise ConfigError(f"lr_min: must be in [0, lr={self.lr}], got {self.lr_min}")
        if len(self.arch_betas) != 2:
            raise ConfigError(f"arch_betas: expected two numbers in [0, 1), got {list(self.arch_betas)}")
        if self.splits is not None:
            if len(self.splits) != 2 or self.splits[0] == self.splits[1]:
                raise ConfigError(f"splits: expected two different split names [weights, architecture], "
                                  f"got {list(self.splits)}")
