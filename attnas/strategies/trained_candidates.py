"""What the searches that train every candidate share (``random-trained``, ``evolution-trained``).

A search whose cost is training, not scoring on shared weights, trains each candidate it
proposes from scratch for ``train.epochs`` epochs and keeps the best validation score
(the test split is never read to choose). :class:`TrainedCandidateSearch` holds the loop:
the subclass proposes the next candidate (:meth:`~TrainedCandidateSearch.propose`), the
loop trains it (candidate ``i`` with seed ``seed + 1000 + i``: its initialisation and batch
order depend on the run's seed and its index alone), logs it, and checkpoints the
subclass's state after every candidate, so a killed search resumes with the candidates
left and ends with the same architecture.

Costs (:mod:`attnas.costs.pareto`, as in the one-shot searches,
:class:`~attnas.strategies.one_shot_costs.CostAwareSearch`): ``constraints`` are upper
limits on measured costs (``{latency_ms: 40}``); a proposed architecture over one is
rejected (an event ``phase: rejected``) by the cost model before it trains and another is
proposed, so ``samples`` architectures within the limits are trained. ``objectives`` (e.g.
``[val_accuracy, latency_ms]``) make the run write ``pareto.json``: the trained candidates
that no other dominates. ``costs.task`` measures the costs on another input size than the
run trains on (e.g. ``{seq_len: 1024}``). The pick stays the best validation score among
the trained (feasible) candidates.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from attnas.config import PositiveInt, TrainConfig, to_mapping
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError
from attnas.costs import pareto
from attnas.costs.cost_model import CostModel
from attnas.reporting.progress import progress
from attnas.runs.rng import seed_everything
from attnas.spaces.base import prior_draws
from attnas.strategies.base import SearchResult, Strategy
from attnas.strategies.one_shot_config import CostOptions, cost_section
from attnas.strategies.one_shot_costs import CostAwareSearch, check_constraints_feasible
from attnas.training.train import fit

#: Candidate ``i`` is initialised and its batches ordered with seed ``run seed + SEED_OFFSET + i``.
SEED_OFFSET = 1000


def _short_training() -> TrainConfig:
    return TrainConfig(epochs=10, patience=0)


@dataclass(frozen=True)
class TrainedSearchConfig(CostOptions):
    """Options of a search that trains every candidate: ``objectives``, ``constraints`` and
    ``costs`` of :class:`~attnas.strategies.one_shot_config.CostOptions` (the example batch
    of the costs defaults to ``train.batch_size``; an architecture over a constraint is not
    trained) and

    Attributes:
        samples: Distinct architectures trained (the search's compute: ``samples x
            train.epochs`` passes over the training data at most).
        train: How each is trained (``epochs`` per candidate; ``init`` is ignored: every
            candidate starts from scratch).
    """

    samples: PositiveInt = 8
    train: TrainConfig = field(default_factory=_short_training)


def random_trained_counterpart(options: TrainedSearchConfig) -> dict:
    """The ``strategy`` section of ``random-trained`` at ``options``' compute: as many
    trained candidates, the same training, the same objectives, constraints and costs."""
    return {"name": "random-trained", "samples": options.samples, "train": to_mapping(options.train),
            **cost_section(options)}


class TrainedCandidateSearch(CostAwareSearch, Strategy):
    """The loop of a search that trains each candidate it proposes (subclasses set
    :attr:`name`, :attr:`Config`, :attr:`prefix` and implement :meth:`restore`,
    :meth:`propose`, :meth:`accept` and :meth:`state`)."""

    #: Prefix of the search's metrics (``<prefix>_samples``, ``<prefix>_best_val_<metric>``).
    prefix = ""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._cost_model: CostModel | None = None
        self.rejected: set[str] = set()  # keys of the candidates rejected by a constraint

    @classmethod
    def check_task(cls, options: TrainedSearchConfig, space: Any, task: Any) -> None:
        """Refuse an objective that is not the task's metric, or constraints no drawn architecture meets."""
        pareto.check_metric(options.objectives, task.metric)
        check_constraints_feasible(options, space, task)

    def prior_candidates(self, n: int) -> list[Arch]:
        """The first ``n`` distinct prior architectures within the constraints, drawn with
        ``random.Random(seed)`` (as many draws as ``sample_distinct`` makes): the first ``k``
        of ``n`` are the same for every ``n >= k``, so searches with one seed start alike.

        Raises:
            ConfigError: When fewer than ``n`` are reachable.
        """
        if not self.options.constraints:
            out = self.space.sample_distinct(n, random.Random(self.seed))
        else:  # distinct draws, those over a limit rejected
            out = []
            for arch in self.space.sample_distinct(prior_draws(n), random.Random(self.seed)):
                if len(out) == n:
                    break
                if self.admit(arch):
                    out.append(arch)
        if len(out) < n:
            raise ConfigError(self.too_few(len(out), n))
        return out

    def too_few(self, found: int, n: int) -> str:
        """The error line when only ``found`` of ``n`` distinct candidates could be drawn."""
        within = " within strategy.constraints" if self.options.constraints else ""
        return (f"strategy.samples: the space has only {found} distinct architectures{within} "
                f"reachable by sampling, fewer than {n}")

    # -- what a subclass provides ---------------------------------------------------------------

    def restore(self, state: dict | None) -> list[dict]:
        """Set up the search from its checkpointed ``state`` (``None``: a fresh start); returns
        the trained candidates so far."""
        raise NotImplementedError

    def propose(self, scored: list[dict]) -> tuple[Arch, dict]:
        """The next candidate to train (within the constraints, not trained yet) and what to
        log with it."""
        raise NotImplementedError

    def accept(self, scored: list[dict]) -> None:
        """Take the candidate just trained (``scored[-1]``) into the search's state."""

    def state(self, scored: list[dict]) -> dict:
        """The checkpointed state after ``scored``."""
        return {"scored": scored}

    # -- the loop -------------------------------------------------------------------------------

    def train_candidate(self, arch: Arch, i: int, extra: dict) -> dict:
        """Train candidate ``i`` (``arch``) from scratch, log it and return its entry."""
        metric, cfg, total = self.task.metric, self.options.train, self.options.samples
        seed_everything(self.seed + SEED_OFFSET + i)
        model = self.space.build(arch, self.task).to(self.device)
        res = fit(model, self.task, cfg, seed=self.seed + SEED_OFFSET + i,
                  desc=f"{self.prefix} candidate {i + 1}/{total}", score_test=False)
        entry = {"arch": arch.choices, f"val_{metric}": res.val, "epochs": res.epochs, **self.cost_entry(arch)}
        self.run.log({"phase": self.name, "candidate": i, **extra, **entry})
        return entry

    def search(self) -> SearchResult:
        ck = self.run.load_checkpoint(self.name)
        scored = self.restore(ck["state"] if ck else None)
        total, metric = self.options.samples, f"val_{self.task.metric}"
        with progress(f"{self.name}: trained candidates", total, completed=len(scored)) as bar:
            while len(scored) < total:
                arch, extra = self.propose(scored)
                scored.append(self.train_candidate(arch, len(scored), extra))
                self.accept(scored)
                self.run.save_checkpoint(self.name, len(scored), self.state(scored))
                bar.advance(1, best=max(s[metric] for s in scored))
        return self.result(scored)

    def result(self, scored: list[dict]) -> SearchResult:
        """The best validation score among the trained candidates (first of ties), the front
        with two or more objectives, and the search's metrics."""
        metric = self.task.metric
        best = max(range(len(scored)), key=lambda j: scored[j][f"val_{metric}"])
        arch = Arch(self.space.name, scored[best]["arch"], meta={"strategy": self.name})
        members = [{**s, "score": s[f"val_{metric}"], "stage": 0} for s in scored]
        if self.multi_objective():
            self.write_front(self.pareto_front(members), members[best])
        metrics = {f"{self.prefix}_samples": len(scored), f"{self.prefix}_epochs_each": self.options.train.epochs,
                   f"{self.prefix}_best_val_{metric}": scored[best][f"val_{metric}"],
                   **self.cost_metrics(members[best])}
        if self._cost_model is not None:
            self._cost_model.close()
        return SearchResult(arch, metrics)
