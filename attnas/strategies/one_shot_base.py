"""What the supernet strategies share: supernet training, candidates, scoring, re-ranking.

:class:`_OneShot` is the base of ``one-shot-evolution`` and ``one-shot-random``
(:mod:`attnas.strategies.one_shot`, whose docstring describes the search) and of
``latent-bo`` (:mod:`attnas.strategies.latent_bo`). It trains the weight-sharing
supernet (Eq. 6); draws and mutates candidates that meet the constraints; scores them
stage by stage with inherited weights (:mod:`attnas.strategies.supernet_scoring`),
checkpointing as it goes; re-ranks the best and keeps the Pareto front. A subclass says
which candidates each stage scores (:meth:`_OneShot._candidates`), how many stages there
are and how many candidates in all.
"""

from __future__ import annotations

import random
import statistics
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

from attnas.config import TrainConfig
from attnas.core.arch import Arch
from attnas.core.errors import CheckpointError, ConfigError
from attnas.costs import pareto
from attnas.costs.cost_model import CostModel
from attnas.costs.measure import splits_into_parts
from attnas.reporting.progress import progress
from attnas.runs.resumable_phase import ResumablePhase, Slot
from attnas.runs.rng import rng_state, seed_everything, set_rng_state
from attnas.scale import distributed
from attnas.scale.parallel import chunks, map_in_threads
from attnas.spaces.base import prior_draws
from attnas.strategies.base import SearchResult, Strategy
from attnas.strategies.one_shot_costs import CostAwareSearch, check_constraints_feasible
from attnas.strategies.supernet_scoring import score_candidates, supernet_score
from attnas.training.train import FitResult, fit, make_optimizer, make_scheduler, train_epoch


class _OneShot(CostAwareSearch, Strategy):
    """Supernet training, candidate generation and scoring shared by the one-shot strategies."""

    requires = ("one-shot",)
    compare_search_seeds = 3

    @classmethod
    def check(cls, options: Any, space: Any) -> None:
        if options.supernet.context_warmup and "contexts" not in space.capabilities:
            raise ConfigError(f"strategy.supernet.context_warmup: the '{space.name}' supernet has no contexts to share")

    @classmethod
    def check_task(cls, options: Any, space: Any, task: Any) -> None:
        pareto.check_metric(getattr(options, "objectives", None), task.metric)
        names = [*(getattr(options, "objectives", None) or ()), *(getattr(options, "constraints", None) or {})]
        if "latency_ms" in names and options.costs.latency == "operations":
            saved = rng_state()
            try:
                model = space.build(space.sample(random.Random(0)), task)
            finally:
                set_rng_state(saved)
            if not splits_into_parts(model):
                raise ConfigError(f"strategy.costs.latency: 'operations' needs networks that split into operations; "
                                  f"those of space '{space.name}' do not (use 'network')")
        check_constraints_feasible(options, space, task)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.supernet: nn.Module | None = None
        self.py_rng = random.Random(self.seed)
        self._weights: tuple | None = None  # (object-store handle, token) of the supernet weights
        self._cost_model: CostModel | None = None
        self.rejected: set[str] = set()  # keys of the candidates rejected by a constraint

    # ------------------------------------------------------------------ supernet

    def _build_supernet(self) -> nn.Module:
        seed_everything(self.seed)
        return self.space.supernet(self.task).to(self.device)

    def load_supernet(self) -> nn.Module:
        """The trained supernet of a finished supernet phase (from its checkpoint)."""
        if self.supernet is None:
            ck = self.run.load_checkpoint("supernet")
            if ck is None or not ck["state"].get("done"):
                raise CheckpointError(f"{self.run.path}: no finished supernet checkpoint to take weights from")
            # building re-seeds; restore the generators so that what the caller does next
            # (e.g. retraining seed k) does not depend on whether the supernet was built already
            saved = rng_state()
            self.supernet = self._build_supernet()
            set_rng_state(saved)
            self.supernet.load_state_dict(ck["state"]["model"])
        return self.supernet

    def train_supernet(self) -> nn.Module:
        """Train (or resume training) the supernet; each step samples one architecture (Eq. 6)."""
        cfg = self.options.supernet
        task = self.task
        supernet = self._build_supernet()
        averaged = None  # the running mean of the last epochs' weights (``cfg.average``)

        def load_averaged(state: dict) -> None:
            nonlocal averaged
            averaged = AveragedModel(supernet)
            averaged.load_state_dict(state)

        phase = ResumablePhase(self.run, "supernet", {"model": supernet}, py_rng=self.py_rng, when_done=("model",))
        if phase.load() and phase.done:
            phase.restore()
            self.elapsed = phase.elapsed
            self.supernet = supernet
            return supernet
        params = list(supernet.parameters())
        opt = make_optimizer(params, cfg)
        sched = make_scheduler(opt, cfg, cfg.epochs)
        gen = torch.Generator().manual_seed(self.seed)
        phase.track(optimizer=opt, generator=gen, scheduler=sched,
                    averaged=Slot(lambda: averaged.state_dict() if averaged is not None else None, load_averaged))
        phase.restore()
        self.elapsed = phase.elapsed
        dist = distributed.current()
        if dist is not None:  # data-parallel: every rank starts from rank 0's weights
            dist.broadcast_module(supernet)
        supernet.train()
        warmup = cfg.warmup_epochs
        with progress("supernet training", cfg.epochs, completed=phase.step) as bar:
            for epoch in phase.steps(cfg.epochs):
                if warmup:
                    supernet.share_contexts(epoch <= warmup)
                # every step trains one architecture drawn from the prior (Eq. 6); in a
                # distributed run every rank draws the same one from its identically seeded sampler
                loss_mean = train_epoch(lambda batch: supernet(batch, self.space.sample(self.py_rng)), task, opt,
                                        params, cfg, gen, dist=dist, phase="supernet", epoch=epoch)
                if sched is not None:
                    sched.step()
                if epoch == warmup:
                    supernet.split_contexts()
                if epoch > cfg.epochs - cfg.average_epochs:
                    if averaged is None:
                        averaged = AveragedModel(supernet)
                    averaged.update_parameters(supernet)
                self.run.log({"phase": "supernet", "epoch": epoch, "loss": round(loss_mean, 6)})
                bar.advance(1, loss=loss_mean)
                done = epoch == cfg.epochs
                if done and averaged is not None:
                    with torch.no_grad():
                        for weight, mean in zip(supernet.parameters(), averaged.module.parameters(), strict=True):
                            weight.copy_(mean)
                if done or epoch % cfg.checkpoint_every == 0:
                    if dist is not None:
                        dist.assert_same(self.py_rng.getstate(), "architecture sampler state")
                    phase.save(epoch, done=done)
        self.elapsed = phase.elapsed
        if cfg.epochs == 0:
            phase.save(0, done=True)
        self.supernet = supernet
        return supernet

    # ------------------------------------------------------------------ scoring

    def score(self, arch: Arch) -> float:
        """Validation score of ``arch`` with inherited supernet weights."""
        return supernet_score(self.supernet, self.task, arch, self.options.supernet.batch_size)

    def score_many(self, candidates: list[dict]) -> Iterator[float]:
        """Scores of ``candidates`` (``Arch.choices``), in order, on the strategy's executor.

        With a parallel executor the supernet weights go to the object store once per
        search and the candidates are split into contiguous chunks, two per worker; each
        worker rebuilds the space, task and supernet from :attr:`spec` (once per process)
        and scores its chunk exactly as :meth:`score` would. On the CPU the candidates are
        scored :meth:`score_threads` at a time in threads of one torch thread each, in this
        process or in each worker alike.
        """
        ex = self.executor
        if not ex.parallel or self.spec is None or len(candidates) < 2:
            self.supernet.eval()  # once, before the threads share the module
            yield from map_in_threads(lambda choices: self.score(Arch(self.space.name, choices)), candidates,
                                      self.score_threads())
            return
        if self._weights is None:
            state = {k: v.detach().cpu() for k, v in self.supernet.state_dict().items()}
            self._weights = (ex.put(state), uuid.uuid4().hex)
        ref, token = self._weights
        parts = chunks(list(candidates), 2 * ex.workers)
        for part_scores in ex.imap(score_candidates, parts, self.spec, ref, token, self.options.supernet.batch_size,
                                   self.score_threads()):
            yield from part_scores

    def score_threads(self) -> int:
        """Candidates scored side by side in this process (``options.score_threads``; on a
        GPU always 1)."""
        n = self.options.score_threads
        if self.device.type != "cpu":
            return 1
        return torch.get_num_threads() if n is None else n

    def sample_unique(self, n: int, seen: set[str], strict: bool = True,
                      source: Iterable[Arch] | None = None) -> list[Arch]:
        """Up to ``n`` architectures from the prior, none in ``seen`` (which is updated).

        Candidates over a constraint are rejected (:meth:`admit`) and others drawn.

        Args:
            source: The architectures to take them from, in order (``latent-bo``: its VAE's
                prior sample); ``None``: drawn from the prior with the strategy's generator.

        Raises:
            ConfigError: With ``strict``, when constraints rejected so many that fewer than
                ``n`` feasible architectures were found in ``50 n + 100`` draws.
        """
        draws = None if source is None else iter(source)
        out, tries, rejected = [], 0, 0
        while len(out) < n and tries < prior_draws(n):
            a = self.space.sample(self.py_rng) if draws is None else next(draws, None)
            if a is None:  # the source is used up
                break
            tries += 1
            if a.key() not in seen:
                seen.add(a.key())
                if not self.admit(a):
                    rejected += 1
                    continue
                out.append(a)
        if strict and rejected and len(out) < n:
            limits = ", ".join(f"{k} <= {v:g}" for k, v in self.options.constraints.items())
            raise ConfigError(f"strategy.constraints: only {len(out)} of the {len(out) + rejected} distinct "
                              f"architectures drawn meet {limits}, {n} were needed; loosen the constraints "
                              f"or ask for fewer candidates")
        return out

    def mutate_unique(self, parents: list[Arch], n: int, seen: set[str]) -> list[Arch]:
        """``n`` unseen children, mutating the parents in turn (cycling when ``n`` exceeds them)."""
        out = []
        for i in range(n):
            parent = parents[i % len(parents)]
            child = None
            for _ in range(20):
                cand = self.space.mutate(parent, self.py_rng)
                if cand.key() not in seen:
                    seen.add(cand.key())
                    if not self.admit(cand):  # over a constraint: mutate again
                        continue
                    child = cand
                    break
            if child is None:  # the neighbourhood is exhausted: a fresh sample keeps the budget
                fresh = self.sample_unique(1, seen, strict=False)
                if not fresh:
                    continue
                child = fresh[0]
            seen.add(child.key())
            out.append(child)
        return out

    def _stages(self) -> int:
        raise NotImplementedError

    def _candidates(self, stage: int, population: list[dict], seen: set[str]) -> list[Arch]:
        raise NotImplementedError

    def _checkpoint_every(self) -> int:
        raise NotImplementedError

    def search_population(self) -> list[dict]:
        """Generate and score candidates stage by stage (resumable); returns the population."""
        phase = ResumablePhase(self.run, "evolution", py_rng=self.py_rng, elapsed=self.elapsed, done_key="finished")
        if phase.resume():
            st = phase.data
            population, pending, scores, stage = st["population"], st["pending"], st["scores"], st["stage"]
            self.elapsed = phase.elapsed
            self.rejected = set(st.get("rejected", ()))
            if phase.done:
                return population
        else:
            population, pending, scores, stage = [], None, [], 0
        seen = {Arch(self.space.name, p["arch"]).key() for p in population} | self.rejected
        if pending is not None:
            seen |= {Arch(self.space.name, a).key() for a in pending}
        phase.start()
        metric = self.task.metric

        def save(step: int, finished: bool = False) -> None:
            phase.save(step, done=finished, population=population, pending=pending, scores=scores, stage=stage,
                       rejected=sorted(self.rejected))
            self.elapsed = phase.elapsed

        total = self._budget()
        with progress("evaluating candidates", total, completed=len(population) + len(scores)) as bar:
            while True:
                if pending is None:
                    pending = [a.choices for a in self._candidates(stage, population, seen)]
                    scores = []
                    save(len(population))
                every = self._checkpoint_every()
                while len(scores) < len(pending):
                    # the candidates up to the next checkpoint are scored together (in parallel
                    # on a parallel executor), then logged and checkpointed in order
                    end = min(len(pending), (len(scores) // every + 1) * every)
                    block = pending[len(scores):end]
                    for choices, s in zip(block, self.score_many(block)):
                        scores.append(s)
                        idx = len(population) + len(scores) - 1
                        self.run.log({"phase": "evolution", "stage": stage, "index": idx, metric: s,
                                      "arch": choices, **self.cost_entry(Arch(self.space.name, choices))})
                        best = max([p["score"] for p in population] + scores)
                        bar.advance(1, score=s, best=best)
                        if len(scores) % every == 0 and len(scores) < len(pending):
                            save(idx + 1)
                population += [{"arch": a, "score": s, "stage": stage, **self.cost_entry(Arch(self.space.name, a))}
                               for a, s in zip(pending, scores)]
                pending, scores = None, []
                if stage >= self._stages():
                    break
                stage += 1
        save(len(population), finished=True)
        return population

    def _budget(self) -> int:
        raise NotImplementedError

    # ------------------------------------------------------------------ re-ranking

    def _rerank_cfg(self) -> TrainConfig:
        sn, rr = self.options.supernet, self.options.rerank
        return TrainConfig(epochs=rr.epochs, lr=sn.lr, weight_decay=sn.weight_decay, optimizer=sn.optimizer,
                           momentum=sn.momentum, batch_size=sn.batch_size, patience=rr.patience,
                           grad_clip=sn.grad_clip)

    def rerank_fits(self, arch: Arch, index: int) -> list[FitResult]:
        """``arch`` fine-tuned from supernet weights, once per re-ranking seed.

        Seed 0 of candidate ``index`` is ``seed + 1000 + index``; further seeds step by
        100,000, so no re-ranking run repeats a seed of the final training.
        """
        fits = []
        for j in range(self.options.rerank.seeds):
            offset = index + 100_000 * j
            seed_everything(self.seed + 1000 + offset)
            model = self.initial_model(arch)
            fits.append(fit(model, self.task, self._rerank_cfg(), seed=self.seed + offset,
                            desc=f"re-rank {index + 1}"))
        return fits

    def rerank(self, population: list[dict]) -> tuple[dict, dict]:
        """Pick the final architecture among the top ``rerank.top_k`` (resumable per candidate)."""
        rr = self.options.rerank
        ranked = sorted(population, key=lambda p: -p["score"])[: max(1, rr.top_k)]
        if rr.epochs <= 0:
            return ranked[0], {}
        ck = self.run.load_checkpoint("rerank")
        results = list(ck["state"]["results"]) if ck else []
        with progress("re-ranking top candidates", len(ranked), completed=len(results)) as bar:
            for i in range(len(results), len(ranked)):
                fits = self.rerank_fits(Arch(self.space.name, ranked[i]["arch"]), i)
                results.append(statistics.fmean(f.val for f in fits))
                self.run.log({"phase": "rerank", "index": i, "val": results[-1], "vals": [f.val for f in fits],
                              "epochs": [f.epochs for f in fits], "supernet_score": ranked[i]["score"],
                              "arch": ranked[i]["arch"]})
                self.run.save_checkpoint("rerank", i + 1, {"results": results})
                bar.advance(1, val=results[-1])
        best = max(range(len(ranked)), key=lambda i: (results[i], -i))
        return ranked[best], {"rerank_val": results[best]}

    # ------------------------------------------------------------------ the search

    def search(self) -> SearchResult | None:
        self.train_supernet()
        dist = distributed.current()
        if dist is not None and not dist.is_main:
            return None  # only the supernet training is data-parallel; rank 0 does the rest alone
        population = self.search_population()
        front = self.pareto_front(population) if self.multi_objective() else None
        best, extra = self.rerank(front if front is not None else population)
        metric = self.task.metric
        metrics = {f"supernet_val_{metric}": best["score"], "evaluated": len(population),
                   "search_seconds": round(self.elapsed, 2), **extra}
        metrics.update(self.cost_metrics(best))
        if front is not None:
            self.write_front(front, best)
            metrics["pareto_size"] = len(front)
        if self._cost_model is not None:
            self._cost_model.close()
        arch = Arch(self.space.name, best["arch"], meta={"strategy": self.name})
        return SearchResult(arch, metrics)

    def initial_model(self, arch: Arch) -> nn.Module:
        """``arch`` as a standalone model holding the supernet's weights for it."""
        supernet = self.load_supernet()
        model = self.space.build(arch, self.task).to(self.device)
        model.load_from_supernet(supernet)
        return model
