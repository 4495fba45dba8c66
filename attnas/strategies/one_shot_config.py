"""Options of the one-shot strategies (:mod:`attnas.strategies.one_shot`): supernet training,
evolution, random sampling and re-ranking."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attnas.config import CheckedConfig, Fraction, NonNegativeInt, OptimConfig, PositiveFloat, PositiveInt, to_mapping
from attnas.core.errors import ConfigError
from attnas.costs.config import CostsConfig


@dataclass(frozen=True)
class SupernetConfig(OptimConfig):
    """Supernet training (Sec. 5.2.3: Adam, lr 0.005; graphs: weight decay 5e-4).

    The optimiser options are those of :class:`~attnas.config.OptimConfig`.

    Attributes:
        epochs: Passes over the training split (one full-batch step for transductive graphs).
        checkpoint_every: Epochs between checkpoints.
        context_warmup: Fraction of the epochs, at the start, in which the contexts of a
            connection share one module (no context, Sec. 5.4.2); then each context's module
            starts from it and trains apart (context-aware sharing, Sec. 4.2.2). For supernets
            with contexts (AutoAttend); 0: contexts apart from the start, as in the paper.
        average: Fraction of the epochs, at the end, whose weights are averaged into the
            supernet that scores the candidates (stochastic weight averaging, Izmailov et al.
            2018: the running mean of the weights after each of those epochs). A supernet
            trains one sampled path per step, so its last weights favour the paths drawn
            last; the average does not. 0: the last weights. The averaged epochs come after
            the context warm-up.
    """

    epochs: NonNegativeInt = 2000
    checkpoint_every: PositiveInt = 200
    context_warmup: Fraction = 0.0
    average: Fraction = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.warmup_epochs + self.average_epochs > self.epochs:
            raise ConfigError(f"strategy.supernet.average: the averaged epochs ({self.average}) overlap the "
                              f"context warm-up ({self.context_warmup}); their sum must be at most 1")

    @property
    def warmup_epochs(self) -> int:
        """Epochs of the context warm-up."""
        return round(self.context_warmup * self.epochs)

    @property
    def average_epochs(self) -> int:
        """Epochs, at the end, whose weights are averaged."""
        return round(self.average * self.epochs)


@dataclass(frozen=True)
class RerankConfig(CheckedConfig):
    """Re-ranking of the best candidates (Sec. 5.2.3: the top 10 of the evolution, the best
    validation score wins).

    Each candidate is fine-tuned from its supernet weights with the supernet's optimiser,
    once per seed, and scored by its best validation score, averaged over the seeds.

    Attributes:
        top_k: How many of the best supernet-scored architectures are re-ranked.
        epochs: Fine-tuning epochs from supernet weights per candidate (0: rank by supernet score).
        patience: Stop a fine-tuning after this many epochs without a better validation
            score (0: run all ``epochs``).
        seeds: Fine-tunings per candidate; its score is the mean of their validation scores.
    """

    top_k: NonNegativeInt = 10
    epochs: NonNegativeInt = 0
    patience: NonNegativeInt = 0
    seeds: PositiveInt = 1


@dataclass(frozen=True)
class EvolutionConfig(CheckedConfig):
    """Evolution of Sec. 5.2.3.

    Attributes:
        population: Architectures sampled from the prior first.
        parents: How many of the best are mutated each round.
        children: New architectures per round (each parent mutated once, cycling if more).
        rounds: Mutation rounds.
        checkpoint_every: Evaluated candidates between checkpoints.
    """

    population: PositiveInt = 500
    parents: PositiveInt = 100
    children: NonNegativeInt = 100
    rounds: NonNegativeInt = 5
    checkpoint_every: PositiveInt = 100


def check_cost_options(options: Any) -> None:
    """Check the ``objectives`` and ``constraints`` of a one-shot strategy's options
    (``one-shot-evolution``, ``one-shot-random``, ``latent-bo``: names, limits, pymoo for two
    or more objectives) and store the limits as floats (:mod:`attnas.costs.pareto`)."""
    from attnas.costs.pareto import check_objectives, normalize_constraints, require_pymoo

    objectives = getattr(options, "objectives", None)  # (a table strategy may have constraints only)
    check_objectives(objectives, options.constraints)
    if options.constraints is not None:
        object.__setattr__(options, "constraints", normalize_constraints(options.constraints))
    if objectives is not None:
        object.__setattr__(options, "objectives", tuple(objectives))
        if len(objectives) >= 2:
            require_pymoo()


def cost_section(options: Any) -> dict:
    """The cost options of ``options`` for the ``strategy`` section of its random-search
    counterpart, so that both rows run the same cost-aware search: ``objectives``,
    ``constraints``, ``relative_to`` (``None`` for a config without it, e.g. ``latent-bo``'s)
    and ``costs``; ``{}`` when ``options`` set neither objectives nor constraints."""
    if not (getattr(options, "objectives", None) or getattr(options, "constraints", None)):
        return {}
    return {"objectives": to_mapping(options.objectives), "constraints": to_mapping(options.constraints),
            "relative_to": to_mapping(getattr(options, "relative_to", None)), "costs": to_mapping(options.costs)}


@dataclass(frozen=True)
class CostOptions(CheckedConfig):
    """The cost options of a search that scores candidates (the one-shot strategies,
    ``random-trained``), checked by :func:`check_cost_options`.

    Attributes:
        objectives: What the search optimises: the task's validation metric
            (``val_<metric>``, maximised) and measured costs (:data:`attnas.costs.config.COSTS`,
            minimised), e.g. ``[val_accuracy, params]``; ``None``: the validation metric
            alone. With two or more, the search keeps a Pareto front (``pareto.json``): of the
            sampled candidates, or, in the evolution, picking the parents of each round by
            NSGA-II's rank and crowding distance.
        constraints: Upper limits on measured costs, e.g. ``{params: 1e6, latency_ms: 5}``:
            a candidate over one is rejected before it is scored and another is drawn.
        relative_to: An architecture of the space (its ``choices``, e.g. ``{mechanism:
            softmax}``) whose costs the ``constraints`` are fractions of: ``{latency_ms:
            0.5}`` admits half its latency. It is measured beside each candidate, at once
            and under the same protocol (:meth:`attnas.costs.cost_model.CostModel.relative`),
            so the fraction holds while the machine's load changes; ``None``: the limits
            are absolute.
        costs: How costs are measured (:class:`~attnas.costs.config.CostsConfig`).
    """

    objectives: list[str] | None = None
    constraints: dict[str, PositiveFloat] | None = None
    relative_to: dict[str, Any] | None = None
    costs: CostsConfig = field(default_factory=CostsConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_cost_options(self)
        if self.relative_to is not None and not self.constraints:
            raise ConfigError("strategy.relative_to: names the architecture the constraints are fractions of, "
                              "but strategy.constraints is not set")


@dataclass(frozen=True)
class OneShotConfig(CostOptions):
    """The options every one-shot strategy has (``one-shot-evolution``, ``one-shot-random``):
    the cost options of :class:`CostOptions` and

    Attributes:
        supernet: Supernet training.
        rerank: Re-ranking of the best candidates.
        score_threads: Candidates scored side by side on the CPU, each in a thread with
            one torch thread (:func:`~attnas.scale.parallel.map_in_threads`); ``None``: as many as
            the torch threads of the run (``attnas --threads``); 1: one at a time with all
            of them. Scores are those of one torch thread whenever this is above 1.
    """

    supernet: SupernetConfig = field(default_factory=SupernetConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    score_threads: PositiveInt | None = None


@dataclass(frozen=True)
class OneShotEvolutionConfig(OneShotConfig):
    """Options of ``one-shot-evolution``: those of :class:`OneShotConfig` and

    Attributes:
        evolution: The evolution.
    """

    evolution: EvolutionConfig = field(default_factory=EvolutionConfig)


@dataclass(frozen=True)
class OneShotRandomConfig(OneShotConfig):
    """Options of ``one-shot-random``: those of :class:`OneShotConfig` and

    Attributes:
        samples: Distinct architectures drawn from the prior and scored.
        checkpoint_every: Evaluated candidates between checkpoints.
    """

    samples: PositiveInt = 1000
    checkpoint_every: PositiveInt = 100
