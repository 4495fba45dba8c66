"""``evolution-trained``: regularized (aging) evolution over briefly trained architectures.

Real, Aggarwal, Huang & Le, *Regularized Evolution for Image Classifier Architecture
Search*, AAAI 2019, Algorithm 1, with every candidate trained from scratch for
``train.epochs`` epochs and scored by its best validation score (as ``random-trained``
does; the test split is never read):

1. the population: the first ``population`` distinct architectures drawn from the prior
   within the constraints (the same draws, trained with the same seeds, as the first
   candidates of ``random-trained`` with the run's seed);
2. until ``samples`` architectures are trained, a cycle: ``sample_size`` members drawn
   uniformly (with replacement), the one of best validation score (first of ties) is the
   parent; the child is the space's mutation of it
   (:meth:`~attnas.spaces.base.Space.mutate`: one layer's mechanism changed, for a
   per-layer hybrid); it trains, joins the population and the oldest member dies.

A child already trained is drawn again (every trained candidate is distinct, as in
random search, so both spend their compute on new architectures), and one over a
constraint is rejected by the cost model before any training (logged ``phase:
rejected``) and drawn again; when ``MUTATION_TRIES`` mutations give none, a fresh prior
architecture takes its place (the fallback of
:func:`attnas.strategies.table_search.mutate_unseen`). The tournament and the pick use the
validation score: constraints bound the costs, ``objectives`` only add ``pareto.json``.

``attnas compare`` sets random search at equal compute beside it
(:meth:`EvolutionTrained.random_counterpart`): ``random-trained`` with as many trained
candidates and the same training. The loop, the cost handling and the checkpoint after
every candidate (with the population and the random generator, so that a killed search
resumes and ends with the same architecture) are those of
:mod:`attnas.strategies.trained_candidates`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

from attnas.config import PositiveInt
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError, UnsupportedError
from attnas.registry import register_strategy
from attnas.runs.rng import rng_state, set_rng_state
from attnas.spaces.base import Space, prior_draws
from attnas.strategies.trained_candidates import (TrainedCandidateSearch, TrainedSearchConfig,
                                                  random_trained_counterpart)

#: Mutations of one parent tried for a child that is new and within the constraints.
MUTATION_TRIES = 50


@dataclass(frozen=True)
class EvolutionTrainedConfig(TrainedSearchConfig):
    """Options of ``evolution-trained``: those of
    :class:`~attnas.strategies.trained_candidates.TrainedSearchConfig` (``samples``: distinct
    architectures trained in all, the population included; ``train``; the cost options) and

    Attributes:
        population: Members kept (Real et al.'s P); the first are drawn from the prior.
        sample_size: Members drawn per tournament (Real et al.'s S), with replacement.
    """

    population: PositiveInt = 4
    sample_size: PositiveInt = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.population > self.samples:
            raise ConfigError(f"strategy.population: {self.population} is more than strategy.samples "
                              f"({self.samples}), the architectures trained in all")
        if self.sample_size > self.population:
            raise ConfigError(f"strategy.sample_size: {self.sample_size} is more than strategy.population "
                              f"({self.population}); a tournament draws from the population")


@register_strategy("evolution-trained")
class EvolutionTrained(TrainedCandidateSearch):
    """Regularized evolution (Real et al., AAAI 2019) with each candidate trained briefly."""

    name = "evolution-trained"
    Config = EvolutionTrainedConfig
    prefix = "evolution"
    compare_search_seeds: ClassVar[int] = 3

    @classmethod
    def check(cls, options: EvolutionTrainedConfig, space: Any) -> None:
        """Refuse a space that cannot mutate its architectures."""
        if type(space).mutate is Space.mutate:
            raise UnsupportedError(f"strategy '{cls.name}' mutates architectures; space '{space.name}' has no "
                                   "mutate() (use 'random-trained')")

    @classmethod
    def random_counterpart(cls, options: EvolutionTrainedConfig, space: Any, seed: int) -> dict:
        """``random-trained`` with as many trained candidates and the same training (equal compute)."""
        return random_trained_counterpart(options)

    def restore(self, state: dict | None) -> list[dict]:
        self._rng = random.Random(self.seed)
        self._initial = self.prior_candidates(self.options.population)
        if state is None:
            self._alive: list[int] = []
            return []
        self._alive = list(state["alive"])
        self.rejected |= set(state["rejected"])
        set_rng_state(state["rng"], self._rng)
        return list(state["scored"])

    def propose(self, scored: list[dict]) -> tuple[Arch, dict]:
        if len(scored) < self.options.population:
            return self._initial[len(scored)], {"origin": "prior"}
        metric = f"val_{self.task.metric}"
        drawn = [self._rng.choice(self._alive) for _ in range(self.options.sample_size)]
        parent = max(drawn, key=lambda j: scored[j][metric])  # first of ties
        trained = {Arch(self.space.name, s["arch"]).key() for s in scored}
        child = self._mutant(Arch(self.space.name, scored[parent]["arch"]), trained)
        if child is not None:
            return child, {"origin": "mutation", "parent": parent}
        return self._fresh(trained), {"origin": "prior"}

    def _new(self, arch: Arch, trained: set[str]) -> bool:
        """Whether ``arch`` is untrained and within the constraints (a rejection is logged once)."""
        key = arch.key()
        return key not in trained and key not in self.rejected and self.admit(arch)

    def _mutant(self, parent: Arch, trained: set[str]) -> Arch | None:
        for _ in range(MUTATION_TRIES):
            child = self.space.mutate(parent, self._rng)
            if self._new(child, trained):
                return child
        return None

    def _fresh(self, trained: set[str]) -> Arch:
        n = self.options.samples
        for _ in range(prior_draws(n)):
            arch = self.space.sample(self._rng)
            if self._new(arch, trained):
                return arch
        raise ConfigError(self.too_few(len(trained), n))

    def accept(self, scored: list[dict]) -> None:
        self._alive.append(len(scored) - 1)
        if len(self._alive) > self.options.population:
            self._alive.pop(0)  # the oldest dies

    def state(self, scored: list[dict]) -> dict:
        return {"scored": scored, "alive": list(self._alive), "rejected": sorted(self.rejected),
                "rng": rng_state(self._rng)}
