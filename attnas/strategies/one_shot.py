"""One-shot search: train a weight-sharing supernet, then search on inherited weights.

Guan et al., ICML 2021, Sec. 4.2 and 5.2.3, following SPOS (Guo et al., ECCV 2020):

1. **Supernet training** (Eq. 6): every training step samples one architecture from
   the prior Γ(A) (:meth:`~attnas.spaces.base.Space.sample`) and updates the weights it
   uses: ``w* = argmin_w E_{a ~ Γ(A)} L_train(a, w)``, estimated by Monte Carlo.
2. **Search** (Eq. 5) on validation accuracy with supernet weights:

   - ``one-shot-evolution``: 500 architectures sampled from the prior; then 5 times,
     the top 100 are each mutated once (another operation, source layer or layer type)
     and the 100 new architectures join the population: 1,000 evaluated in all.
   - ``one-shot-random``: the same number of architectures sampled from the prior
     (the random-search baseline with the same evaluation budget).

3. **Re-ranking**: the top 10 are optionally fine-tuned from the supernet weights
   (``rerank.epochs`` with early stopping after ``rerank.patience``, ``rerank.seeds``
   times) and the best mean validation score wins (``epochs: 0`` ranks by supernet score
   alone).

Cost-aware search (:mod:`attnas.costs.pareto`, :mod:`attnas.costs.measure`): ``strategy.constraints``
rejects a candidate over a limit on a measured cost before it is scored (sampling and
mutation draw another; a space with too few feasible architectures is an error), and
``strategy.objectives`` with two or more objectives keeps a Pareto front: evolution picks
its parents by NSGA-II's rank and crowding distance, the re-ranking chooses ``arch.json``
among the front's members by validation score, and ``pareto.json`` lists every member.

State (supernet weights, optimiser, population, pending candidates, rejected candidates,
RNG) is checkpointed in the run directory, and measured costs are cached there
(``costs.jsonl``); a killed search resumes and ends with the same architecture (and
front) as an uninterrupted one. The options are in :mod:`attnas.strategies.one_shot_config`;
what the two strategies share (with ``latent-bo``) is in :mod:`attnas.strategies.one_shot_base`.
"""

from __future__ import annotations

from typing import Any

from attnas.config import to_mapping
from attnas.core.arch import Arch
from attnas.registry import register_strategy
from attnas.strategies.one_shot_base import _OneShot
from attnas.strategies.one_shot_config import OneShotEvolutionConfig, OneShotRandomConfig, cost_section


@register_strategy("one-shot-evolution")
class OneShotEvolution(_OneShot):
    """Supernet + evolution on inherited weights (AutoAttend, Sec. 4.2 and 5.2.3)."""

    name = "one-shot-evolution"
    Config = OneShotEvolutionConfig

    @classmethod
    def random_counterpart(cls, options: OneShotEvolutionConfig, space: Any, seed: int) -> dict:
        """Random search with the same supernet, as many scored architectures and the same re-ranking."""
        ev = options.evolution
        return random_search_section(options, ev.population + ev.rounds * ev.children)

    def _stages(self) -> int:
        return self.options.evolution.rounds

    def _budget(self) -> int:
        ev = self.options.evolution
        return ev.population + ev.rounds * ev.children

    def _checkpoint_every(self) -> int:
        return self.options.evolution.checkpoint_every

    def _candidates(self, stage: int, population: list[dict], seen: set[str]) -> list[Arch]:
        ev = self.options.evolution
        if stage == 0:
            return self.sample_unique(ev.population, seen)
        ranked = self.select_parents(population, ev.parents, stage)
        parents = [Arch(self.space.name, p["arch"]) for p in ranked]
        return self.mutate_unique(parents, ev.children, seen)


@register_strategy("one-shot-random")
class OneShotRandom(_OneShot):
    """Supernet + random search with the same evaluation budget (the baseline of Table 4)."""

    name = "one-shot-random"
    Config = OneShotRandomConfig

    @classmethod
    def random_counterpart(cls, options: OneShotRandomConfig, space: Any, seed: int) -> None:
        """Random search is its own counterpart."""
        return None

    def _stages(self) -> int:
        return 0

    def _budget(self) -> int:
        return self.options.samples

    def _checkpoint_every(self) -> int:
        return self.options.checkpoint_every

    def _candidates(self, stage: int, population: list[dict], seen: set[str]) -> list[Arch]:
        return self.sample_unique(self.options.samples, seen)


def random_search_section(options: Any, samples: int) -> dict:
    """The ``strategy`` section of ``one-shot-random`` with ``options``' supernet and
    re-ranking and ``samples`` scored architectures (the equal-budget random search of a
    one-shot strategy, with its objectives and constraints)."""
    section = {"name": "one-shot-random", "supernet": to_mapping(options.supernet), "samples": samples,
               "rerank": to_mapping(options.rerank), "score_threads": getattr(options, "score_threads", None)}
    section.update(cost_section(options))  # the same cost-aware search
    return section
