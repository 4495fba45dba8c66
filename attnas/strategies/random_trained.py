"""``random-trained``: random search that trains every sampled architecture for a short while.

The random-search baseline of a search whose cost is training, not scoring (DARTS,
CAR-DARTS, attention-mechanism search, ``evolution-trained``): ``samples`` architectures
are drawn from the space's prior (distinct, with the run's seed), each is trained from
scratch for ``train.epochs`` epochs with ``train``'s optimiser, and the one with the best
validation score wins (Li & Talwalkar, *Random Search and Reproducibility for Neural
Architecture Search*, UAI 2019: random search with early stopping given the search's
compute). ``attnas compare`` sets ``samples x train.epochs`` to the searched strategy's
epochs (:meth:`~attnas.strategies.base.Strategy.random_counterpart`): the same number of
passes over the training data, so both rows get the same optimiser steps. The test split
is never read to choose.

Constraints, objectives and costs (a drawn architecture over a limit is rejected before it
trains and another is drawn; ``pareto.json`` with two or more objectives), the training of
each candidate and the checkpoint after every candidate are those of
:mod:`attnas.strategies.trained_candidates`: a killed search resumes with the candidates
left and ends with the same architecture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attnas.core.arch import Arch
from attnas.registry import register_strategy
from attnas.strategies.trained_candidates import TrainedCandidateSearch, TrainedSearchConfig

TAG = "random-trained"


@dataclass(frozen=True)
class RandomTrainedConfig(TrainedSearchConfig):
    """Options of ``random-trained``: those of
    :class:`~attnas.strategies.trained_candidates.TrainedSearchConfig` (``samples``: distinct
    architectures drawn from the prior and trained; ``train``; the cost options)."""


@register_strategy("random-trained")
class RandomTrained(TrainedCandidateSearch):
    """Random search: train each of ``samples`` prior architectures briefly, keep the best on validation."""

    name = TAG
    Config = RandomTrainedConfig
    prefix = "random"

    @classmethod
    def random_counterpart(cls, options: RandomTrainedConfig, space: Any, seed: int) -> None:
        """Random search is its own counterpart."""
        return None

    def candidates(self) -> list[Arch]:
        """The ``samples`` distinct prior architectures within the constraints, in the order they are trained."""
        return self.prior_candidates(self.options.samples)

    def restore(self, state: dict | None) -> list[dict]:
        self._archs = self.candidates()
        return list(state["scored"]) if state else []

    def propose(self, scored: list[dict]) -> tuple[Arch, dict]:
        return self._archs[len(scored)], {}
