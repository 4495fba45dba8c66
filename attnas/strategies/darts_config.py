"""Options of ``darts`` (:mod:`attnas.strategies.darts`) and of the searches built on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

from attnas.config import (CheckedConfig, Fraction, NonNegativeFloat, OptimConfig, PositiveFloat, PositiveInt,
                           moved_into, with_defaults)
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


#: The weight optimiser of a DARTS search: :class:`~attnas.config.OptimConfig`'s fields with
#: DARTS's defaults (Liu et al., ICLR 2019; AutoLA, Ma et al., NeurIPS 2020, Sec. 4.2).
DartsOptimConfig = with_defaults(
    OptimConfig, "DartsOptimConfig",
    "The weight optimiser of ``darts`` (:class:`~attnas.config.OptimConfig`; defaults SGD lr 0.025, "
    "cosine-annealed to 0.001, momentum 0.9, weight decay 3e-4, gradient norm clipped at 5, batches of 128). "
    "The search trains the weights by SGD with cosine annealing only.",
    lr=0.025, lr_min=0.001, optimizer="sgd", scheduler="cosine", weight_decay=3e-4, grad_clip=5.0)


@dataclass(frozen=True)
class DartsConfig(CheckedConfig):
    """Options of ``darts`` (defaults: AutoLA Sec. 4.2 and DARTS).

    Attributes:
        epochs: Search epochs (one epoch = one pass over the weight split; 100 in AutoLA).
        optim: The weight optimiser and the batches (:class:`DartsOptimConfig`: SGD lr 0.025,
            cosine-annealed to ``lr_min`` 0.001, momentum 0.9, weight decay 3e-4, gradient
            norm clipped at 5, mini-batches of 128 for both steps, as in AutoLA). Given flat
            (the shape before this section, ``strategy: {lr: 0.05}``), these keys are read
            as ``optim.<key>``.
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
    optim: DartsOptimConfig = field(default_factory=DartsOptimConfig)
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

    moved_keys = moved_into(OptimConfig, "optim")

    def __post_init__(self) -> None:
        super().__post_init__()
        o = self.optim
        if (o.optimizer, o.scheduler) != ("sgd", "cosine"):
            raise ConfigError(f"optim: the weights of a DARTS search are trained by SGD with cosine annealing "
                              f"(optimizer: sgd, scheduler: cosine), got optimizer: {o.optimizer}, "
                              f"scheduler: {o.scheduler}")
        if not o.lr_min <= o.lr:
            raise ConfigError(f"optim.lr_min: must be in [0, optim.lr={o.lr}], got {o.lr_min}")
        if len(self.arch_betas) != 2:
            raise ConfigError(f"arch_betas: expected two numbers in [0, 1), got {list(self.arch_betas)}")
        if self.splits is not None:
            if len(self.splits) != 2 or self.splits[0] == self.splits[1]:
                raise ConfigError(f"splits: expected two different split names [weights, architecture], "
                                  f"got {list(self.splits)}")
