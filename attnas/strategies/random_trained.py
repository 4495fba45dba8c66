"""``random-trained``: random search that trains every sampled architecture for a short while.

The random-search baseline of a search whose cost is training, not scoring (DARTS,
CAR-DARTS, attention-mechanism search): ``samples`` architectures are drawn from the
space's prior (distinct, with the run's seed), each is trained from scratch for
``train.epochs`` epochs with ``train``'s optimiser, and the one with the best validation
score wins (Li & Talwalkar, *Random Search and Reproducibility for Neural Architecture
Search*, UAI 2019: random search with early stopping given the search's compute).
``attnas compare`` sets ``samples x train.epochs`` to the searched strategy's epochs
(:meth:`~attnas.strategies.base.Strategy.random_counterpart`): the same number of
passes over the training data, so both rows get the same optimiser steps. The test
split is never read to choose.

Checkpoint ``random-trained`` after every candidate: a killed search resumes with the
candidates left and ends with the same architecture (each candidate's initialisation and
batch order are functions of the run's seed and its index alone).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from attnas.config import CheckedConfig, PositiveInt, TrainConfig
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError
from attnas.registry import register_strategy
from attnas.runs.rng import seed_everything
from attnas.strategies.base import SearchResult, Strategy
from attnas.training.train import fit

TAG = "random-trained"


def _short_training() -> TrainConfig:
    return TrainConfig(epochs=10, patience=0)


@dataclass(frozen=True)
class RandomTrainedConfig(CheckedConfig):
    """Options of ``random-trained``.

    Attributes:
        samples: Distinct architectures drawn from the prior and trained.
        train: How each is trained (``epochs`` per candidate; ``init`` is ignored: every
            candidate starts from scratch).
    """

    samples: PositiveInt = 8
    train: TrainConfig = field(default_factory=_short_training)


@register_strategy("random-trained")
class RandomTrained(Strategy):
    """Random search: train each of ``samples`` prior architectures briefly, keep the best on validation."""

    name = "random-trained"
    Config = RandomTrainedConfig

    @classmethod
    def random_counterpart(cls, options: RandomTrainedConfig, space, seed: int) -> None:
        """Random search is its own counterpart."""
        return None

    def candidates(self) -> list[Arch]:
        """The ``samples`` distinct prior architectures, in the order they are trained."""
        out = self.space.sample_distinct(self.options.samples, random.Random(self.seed))
        if len(out) < self.options.samples:
            raise ConfigError(f"strategy.samples: the space has only {len(out)} distinct architectures reachable "
                              f"by sampling, fewer than {self.options.samples}")
        return out

    def search(self) -> SearchResult:
        archs = self.candidates()
        ck = self.run.load_checkpoint(TAG)
        scored: list[dict] = list(ck["state"]["scored"]) if ck else []
        metric = self.task.metric
        cfg = self.options.train
        for i in range(len(scored), len(archs)):
            seed_everything(self.seed + 1000 + i)
            model = self.space.build(archs[i], self.task).to(self.device)
            res = fit(model, self.task, cfg, seed=self.seed + 1000 + i,
                      desc=f"random candidate {i + 1}/{len(archs)}", score_test=False)
            scored.append({"arch": archs[i].choices, f"val_{metric}": res.val, "epochs": res.epochs})
            self.run.log({"phase": TAG, "candidate": i, "arch": archs[i].choices, f"val_{metric}": res.val,
                          "epochs": res.epochs})
            self.run.save_checkpoint(TAG, i + 1, {"scored": scored})
        best = max(range(len(scored)), key=lambda j: scored[j][f"val_{metric}"])  # first of ties
        arch = Arch(self.space.name, scored[best]["arch"], meta={"strategy": self.name})
        return SearchResult(arch, {"random_samples": len(scored), "random_epochs_each": cfg.epochs,
                                   f"random_best_val_{metric}": scored[best][f"val_{metric}"]})
