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

Costs (:mod:`attnas.costs.pareto`), as in the one-shot searches: ``constraints`` are upper
limits on measured costs (``{latency_ms: 40}``); a drawn architecture over one is rejected
(an event ``phase: rejected``) before it trains and another is drawn, so ``samples``
architectures within the limits are trained. ``objectives`` (e.g. ``[val_accuracy,
latency_ms]``) make the run write ``pareto.json``: the trained candidates that no other
dominates. ``costs`` says how they are measured; ``costs.task`` measures them on another
input size than the run trains on (e.g. ``{seq_len: 1024}``: a per-layer hybrid's
latency at long sequences, its accuracy at the trained length). The pick stays the best
validation score among the trained (feasible) candidates.

Checkpoint ``random-trained`` after every candidate: a killed search resumes with the
candidates left and ends with the same architecture (each candidate's initialisation and
batch order are functions of the run's seed and its index alone).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from typing import Any

from attnas.config import PositiveInt, TrainConfig
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError
from attnas.costs import pareto
from attnas.costs.cost_model import CostModel
from attnas.registry import register_strategy
from attnas.runs.rng import seed_everything
from attnas.strategies.base import SearchResult, Strategy
from attnas.strategies.one_shot_config import CostOptions
from attnas.strategies.one_shot_costs import CostAwareSearch, check_constraints_feasible
from attnas.training.train import fit

TAG = "random-trained"


def _short_training() -> TrainConfig:
    return TrainConfig(epochs=10, patience=0)


@dataclass(frozen=True)
class RandomTrainedConfig(CostOptions):
    """Options of ``random-trained``: ``objectives``, ``constraints`` and ``costs`` of
    :class:`~attnas.strategies.one_shot_config.CostOptions` (the example batch of the costs
    defaults to ``train.batch_size``; an architecture over a constraint is not trained) and

    Attributes:
        samples: Distinct architectures drawn from the prior and trained.
        train: How each is trained (``epochs`` per candidate; ``init`` is ignored: every
            candidate starts from scratch).
    """

    samples: PositiveInt = 8
    train: TrainConfig = field(default_factory=_short_training)


@register_strategy("random-trained")
class RandomTrained(CostAwareSearch, Strategy):
    """Random search: train each of ``samples`` prior architectures briefly, keep the best on validation."""

    name = "random-trained"
    Config = RandomTrainedConfig

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._cost_model: CostModel | None = None
        self.rejected: set[str] = set()  # keys of the candidates rejected by a constraint

    @classmethod
    def check_task(cls, options: RandomTrainedConfig, space: Any, task: Any) -> None:
        """Refuse an objective that is not the task's metric, or constraints no drawn architecture meets."""
        pareto.check_metric(options.objectives, task.metric)
        check_constraints_feasible(options, space, task)

    @classmethod
    def random_counterpart(cls, options: RandomTrainedConfig, space, seed: int) -> None:
        """Random search is its own counterpart."""
        return None

    def candidates(self) -> list[Arch]:
        """The ``samples`` distinct prior architectures within the constraints, in the order they are trained."""
        n = self.options.samples
        if not self.options.constraints:
            out = self.space.sample_distinct(n, random.Random(self.seed))
        else:  # distinct draws, those over a limit rejected (as many draws as sample_distinct makes)
            drawn = self.space.sample_distinct(50 * n + 100, random.Random(self.seed))
            out = []
            for arch in drawn:
                if len(out) == n:
                    break
                if self.admit(arch):
                    out.append(arch)
        if len(out) < n:
            within = " within strategy.constraints" if self.options.constraints else ""
            raise ConfigError(f"strategy.samples: the space has only {len(out)} distinct architectures{within} "
                              f"reachable by sampling, fewer than {n}")
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
            costs = self.cost_entry(archs[i])
            scored.append({"arch": archs[i].choices, f"val_{metric}": res.val, "epochs": res.epochs, **costs})
            self.run.log({"phase": TAG, "candidate": i, "arch": archs[i].choices, f"val_{metric}": res.val,
                          "epochs": res.epochs, **costs})
            self.run.save_checkpoint(TAG, i + 1, {"scored": scored})
        best = max(range(len(scored)), key=lambda j: scored[j][f"val_{metric}"])  # first of ties
        arch = Arch(self.space.name, scored[best]["arch"], meta={"strategy": self.name})
        members = [{**s, "score": s[f"val_{metric}"], "stage": 0} for s in scored]
        if self.multi_objective():
            self.write_front(self.pareto_front(members), members[best])
        if self._cost_model is not None:
            self._cost_model.close()
        return SearchResult(arch, {"random_samples": len(scored), "random_epochs_each": cfg.epochs,
                                   f"random_best_val_{metric}": scored[best][f"val_{metric}"],
                                   **self.cost_metrics(members[best])})
