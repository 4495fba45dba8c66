"""``latent-bo``: Bayesian optimisation in a graph VAE's latent space, scored by a supernet.

Chatzianastasis et al., 2021, Sec. 4.3 (after D-VAE, Sec. 4.3) carried over to any space that can be drawn
as a DAG and trained one-shot (capabilities ``one-shot`` and ``dag``, e.g. AutoAttend):

1. ``supernet``: the one-shot supernet is trained exactly as ``one-shot-evolution``
   trains it (Eq. 6 of AutoAttend; same options, same seed, same weights).
2. ``vae``: ``vae.samples`` distinct architectures are drawn from the space's prior,
   turned into DAGs (``space.to_dag`` with the space's ``dag_vocabulary``) and a graph VAE
   (D-VAE, DVAE-EMB, GCN or GCN-EMB) is trained on them, unsupervised.
3. ``latent-bo``: the first ``initial`` of those architectures are scored by the supernet
   (validation score with inherited weights) and their latent means are the BO's initial
   data; then round after round a sparse GP is fitted on ``(z, score)``, a batch of latent
   points is chosen by expected improvement (BoTorch's qEI), each point is decoded
   ``decode_attempts`` times and its most common decoding that ``space.from_dag`` accepts is
   scored by the supernet. A decoding that is no architecture of the space is not
   evaluated: it is labelled ``invalid`` and enters the GP with the worst observed score
   (D-VAE's rule); one already scored enters with its known score at no cost. Rounds go on
   until ``budget`` distinct architectures have been scored (the initial ones included),
   the evaluation budget of evolution (500 + 5 x 100 in AutoAttend), or ``bo.iterations``
   rounds have run.
4. ``rerank``: the best scored architectures are re-ranked as in ``one-shot-evolution``.

``strategy.constraints`` (and ``strategy.costs``, how costs are measured) work as in
``one-shot-evolution`` (:mod:`attnas.costs.pareto`, :mod:`attnas.costs.measure`): the ``initial``
architectures are the first of the VAE's prior sample that meet every limit (a space with
too few feasible ones is an error), and a BO proposal whose decoding is over a limit is not
scored: it is logged as a ``rejected`` event and enters the GP with the worst observed
score, as an invalid decoding does. The VAE still trains on the whole prior sample.
Metrics count the rejected proposals (``bo_rejected``) and the distinct rejected
architectures (``rejected``). ``strategy.objectives`` may only name the validation metric:
a Pareto front of two or more objectives is ``one-shot-evolution``'s.

Every scored architecture is an event with its ``index`` and the task's metric, so
``attnas report`` plots it like evolution's candidates (``stage`` 0: the initial sample,
``k``: BO round ``k``). The state of every phase is checkpointed (the initial sample and
the rejected architectures included) and measured costs are cached in ``costs.jsonl``; a
killed search resumes, re-using the costs, and ends with the same architecture.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import torch

from attnas.config import CheckedConfig, PositiveFloat, PositiveInt, moved_into, with_defaults
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError
from attnas.costs.config import CostsConfig
from attnas.graphvae.bo import BOConfig, propose
from attnas.graphvae.gp import SparseGPConfig
from attnas.graphvae.space_dags import SpaceDecoder, space_dataset
from attnas.graphvae.train import VAEOptimConfig, VAETrainConfig, TrainState, new_state
from attnas.graphvae.vae import paper_model
from attnas.registry import register_strategy
from attnas.reporting.progress import progress
from attnas.runs.resumable_phase import ResumablePhase
from attnas.strategies.base import SearchResult
from attnas.strategies.graph_vae import MODELS
from attnas.strategies.one_shot import random_search_section
from attnas.strategies.one_shot_base import _OneShot
from attnas.strategies.one_shot_config import RerankConfig, SupernetConfig, check_cost_options
from attnas.strategies.vae_training import train_vae_phase


#: How ``latent-bo`` optimises its VAE (:class:`~attnas.graphvae.train.VAEOptimConfig`, shorter).
LatentVAEOptimConfig = with_defaults(
    VAEOptimConfig, "LatentVAEOptimConfig",
    "The optimisation of ``latent-bo``'s graph VAE (:class:`~attnas.graphvae.train.VAEOptimConfig`, "
    "defaults 50 epochs, lr 1e-3).",
    epochs=50, lr=1e-3)


@dataclass(frozen=True)
class LatentVAEConfig(CheckedConfig):
    """The graph VAE of ``latent-bo`` and the architectures it learns from.

    Attributes:
        model: ``dvae``, ``dvae-emb``, ``gcn`` or ``gcn-emb`` (Chatzianastasis et al., 2021).
        samples: Distinct architectures drawn from the prior to train on.
        hidden: Hidden size.
        latent: Latent size.
        train: The VAE's optimisation (:class:`~attnas.graphvae.train.VAEOptimConfig`;
            here 50 ``epochs`` per iteration, Adam ``lr`` 1e-3, batches of 32). Given flat
            (``vae: {epochs: 50}``, the shape before this section), they are read as
            ``train.<key>``.
        iterations: ``T`` of Chatzianastasis et al., 2021, Sec. 3.3 (training rounds carrying the operation
            embeddings over).
        checkpoint_every: Epochs between checkpoints.
    """

    model: Literal["dvae", "dvae-emb", "gcn", "gcn-emb"] = "dvae-emb"
    samples: PositiveInt = 5000
    hidden: PositiveInt = 128
    latent: PositiveInt = 16
    train: LatentVAEOptimConfig = field(default_factory=lambda: LatentVAEOptimConfig())
    iterations: PositiveInt = 1
    checkpoint_every: PositiveInt = 5

    field_prefix = "vae."
    moved_keys = moved_into(VAEOptimConfig, "train")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.train_settings(0)

    def train_settings(self, seed: int) -> VAETrainConfig:
        """The VAE's optimisation settings."""
        return VAETrainConfig.of(self.train, self.iterations, seed)


@dataclass(frozen=True)
class LatentBOConfig(CheckedConfig):
    """Options of ``latent-bo``.

    Attributes:
        supernet: Supernet training (as ``one-shot-evolution``).
        vae: The graph VAE and its training architectures.
        initial: Prior architectures scored before the first BO round (at most ``vae.samples``).
        budget: Distinct architectures scored by the supernet in all (initial ones included);
            evolution's is ``population + rounds * children``.
        bo: Batch-EI settings; ``bo.iterations`` caps the number of rounds. By default the
            batch is optimised jointly (``sequential: false``): with a sparse GP this was
            8-12 times faster than greedy selection here and reached a higher batch EI.
        checkpoint_every: Scored architectures between checkpoints of the initial sample.
        rerank: Re-ranking of the best scored architectures (as ``one-shot-evolution``).
        objectives: ``None`` or the validation metric alone (``[val_<metric>]``): the BO
            maximises one score; a Pareto front of two or more objectives is
            ``one-shot-evolution``'s.
        constraints: Upper limits on measured costs, as in ``one-shot-evolution``: the
            initial sample is drawn among the architectures that meet them, and a BO
            proposal over one is not scored (a ``rejected`` event; it enters the GP with the
            worst observed score, as an invalid decoding does).
        costs: How costs are measured (:class:`~attnas.costs.config.CostsConfig`).
    """

    supernet: SupernetConfig = field(default_factory=SupernetConfig)
    vae: LatentVAEConfig = field(default_factory=LatentVAEConfig)
    initial: PositiveInt = 500
    budget: PositiveInt = 1000
    bo: BOConfig = field(default_factory=lambda: BOConfig(
        iterations=20, batch_size=100, decode_attempts=100, num_restarts=4, raw_samples=512, mc_samples=128,
        maxiter=100, sequential=False, gp=SparseGPConfig(inducing=256)))
    checkpoint_every: PositiveInt = 100
    rerank: RerankConfig = field(default_factory=RerankConfig)
    objectives: list[str] | None = None
    constraints: dict[str, PositiveFloat] | None = None
    costs: CostsConfig = field(default_factory=CostsConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.objectives is not None and len(self.objectives) >= 2:
            raise ConfigError(f"strategy.objectives: latent-bo optimises the validation metric alone, got "
                              f"{list(self.objectives)}; one-shot-evolution keeps a Pareto front of two or more")
        check_cost_options(self)
        if not 2 <= self.initial <= self.vae.samples:
            raise ConfigError(f"initial: must be in 2..vae.samples={self.vae.samples}, got {self.initial}")
        if self.budget < self.initial:
            raise ConfigError(f"budget: must be >= initial={self.initial}, got {self.budget}")


@register_strategy("latent-bo")
class LatentBO(_OneShot):
    """Supernet + graph VAE + batch EI in its latent space (Chatzianastasis et al., 2021, Sec. 4.3, on any
    DAG space)."""

    name = "latent-bo"
    Config = LatentBOConfig
    requires = ("one-shot", "dag")
    needs = ("gpytorch", "botorch")  # the GP and its acquisition (attnas[bo])

    @classmethod
    def check(cls, options: LatentBOConfig, space: Any) -> None:
        """Also refuse an initial sample larger than the space, before anything is written."""
        super().check(options, space)
        try:
            size = space.size()
        except NotImplementedError:
            return
        if size < options.initial:
            raise ConfigError(f"strategy.initial: {options.initial} initial architectures, but the '{space.name}' "
                              f"space has only {size}")

    @classmethod
    def random_counterpart(cls, options: LatentBOConfig, space: Any, seed: int) -> dict:
        """Random search with the same supernet, ``budget`` scored architectures and the same re-ranking."""
        return random_search_section(options, options.budget)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._samples: list[Arch] | None = None

    # ------------------------------------------------------------------ the VAE's data

    def vae_samples(self) -> list[Arch]:
        """``vae.samples`` distinct prior architectures (drawn from their own seeded generator)."""
        if self._samples is None:
            out = self.space.sample_distinct(self.options.vae.samples, random.Random(self.seed + 1))
            if len(out) < self.options.initial:
                raise ConfigError(f"the space has only {len(out)} distinct architectures reachable by sampling; "
                                  f"initial={self.options.initial} is too many")
            self._samples = out
        return self._samples

    def train_vae(self):
        """Train (or resume) the graph VAE on the prior samples; returns the model and its data."""
        cfg = self.options.vae
        data = space_dataset(self.space, self.vae_samples())
        settings = cfg.train_settings(self.seed)

        def fresh() -> TrainState:
            config = paper_model(MODELS[cfg.model], hidden=cfg.hidden, latent=cfg.latent)
            return new_state(config, data.num_types, data.max_nodes, settings)

        def on_epoch(st: TrainState, epoch: int) -> None:
            rec = st.history[-1]
            self.run.log({"phase": "vae", "epoch": epoch, **{k: round(rec[k], 6) for k in ("loss", "recon", "kld")}})

        state, self.elapsed = train_vae_phase(self.run, fresh, data, every=cfg.checkpoint_every, elapsed=self.elapsed,
                                              on_epoch=on_epoch,
                                              description=f"train {MODELS[cfg.model]} on {len(data)} samples")
        return state.model, data

    # ------------------------------------------------------------------ BO

    def search_population(self) -> list[dict]:
        """Score the initial sample, then BO rounds until the budget is used (resumable)."""
        cfg = self.options
        metric = self.task.metric
        phase = ResumablePhase(self.run, "latent-bo", rng=False, done_key="finished")
        found = phase.load()
        if found:
            self.rejected = set(phase.data.get("rejected", ()))
        if found and phase.done:
            self.elapsed, self.stats = phase.elapsed, phase.data["stats"]
            return phase.data["population"]
        model, data = self.train_vae()
        model.eval()
        decoder = SpaceDecoder(self.space, data.vocab)
        bo = replace(cfg.bo, seed=cfg.bo.seed + self.seed)
        gen = torch.Generator().manual_seed(bo.seed)
        phase.track(generator=gen)
        if found:
            phase.restore()
            st = phase.data
            self.elapsed = phase.elapsed
            population, rnd, stats = st["population"], st["round"], st["stats"]
            x, y = st["x"], st["y"]
            stats.setdefault("rejected", 0)  # a checkpoint of a version without constraints
            initial = [Arch(self.space.name, c) for c in st["initial"]] if "initial" in st else None
        else:
            phase.elapsed = self.elapsed  # the search's time so far (supernet, VAE)
            population, rnd = [], 0
            stats = {"invalid": 0, "repeats": 0, "rejected": 0, "proposed": 0}
            x = y = initial = None
        phase.start()
        scored = {Arch(self.space.name, p["arch"]).key(): p["score"] for p in population}

        def save(step: int, finished: bool = False) -> None:
            phase.save(step, done=finished, population=population, round=rnd, stats=stats, x=x, y=y,
                       initial=[a.choices for a in initial], rejected=sorted(self.rejected))
            self.elapsed = phase.elapsed

        def record(arch: Arch, score: float, stage: int) -> None:
            costs = self.cost_entry(arch)
            population.append({"arch": arch.choices, "score": score, "stage": stage, **costs})
            scored[arch.key()] = score
            self.run.log({"phase": "latent-bo", "stage": stage, "index": len(population) - 1, metric: score,
                          "arch": arch.choices, **costs})

        if initial is None:  # the first feasible ones of the VAE's prior sample (all of them without constraints)
            initial = self.sample_unique(cfg.initial, set(), source=self.vae_samples())
            save(len(population))
        with progress("latent BO: scored architectures", cfg.budget, completed=len(population)) as bar:
            for i in range(len(population), cfg.initial):  # the BO's initial data
                record(initial[i], self.score(initial[i]), 0)
                bar.advance(1, score=population[-1]["score"])
                if len(population) % cfg.checkpoint_every == 0 and len(population) < cfg.initial:
                    save(len(population))
            if x is None:
                x = model.latent_means(space_dataset(self.space, initial, max_nodes=data.max_nodes).graphs).double()
                y = torch.tensor([p["score"] for p in population[: cfg.initial]], dtype=torch.float64)
                save(len(population))
            while len(population) < cfg.budget and rnd < bo.iterations:
                cand, decoded = propose(model, x, y, decoder.is_valid, bo, rnd, gen)
                rnd += 1
                keep, values = [], []
                for i, g in enumerate(decoded):
                    stats["proposed"] += 1
                    arch = None if g is None else decoder.archs(g)[0]
                    if arch is not None and arch.key() in scored:
                        stats["repeats"] += 1
                        keep.append(i)
                        values.append(scored[arch.key()])
                    elif arch is None or arch.key() in self.rejected or (len(population) < cfg.budget
                                                                         and not self.admit(arch)):
                        # no architecture, or one over a constraint: not scored, the worst observed score
                        stats["invalid" if arch is None else "rejected"] += 1
                        keep.append(i)
                        values.append(float(y.min()))
                    elif len(population) < cfg.budget:
                        record(arch, self.score(arch), rnd)
                        bar.advance(1, score=population[-1]["score"])
                        keep.append(i)
                        values.append(population[-1]["score"])
                x = torch.cat([x, cand[keep].to(x.dtype)])
                y = torch.cat([y, torch.tensor(values, dtype=torch.float64)])
                save(len(population))
        self.stats = stats
        save(len(population), finished=True)
        return population

    # ------------------------------------------------------------------ the search

    def search(self) -> SearchResult:
        self.train_supernet()
        population = self.search_population()
        best, extra = self.rerank(population)
        metric = self.task.metric
        bo_found = [p["score"] for p in population if p["stage"] > 0]
        metrics = {f"supernet_val_{metric}": best["score"], "evaluated": len(population),
                   "search_seconds": round(self.elapsed, 2),
                   f"initial_best_{metric}": max(p["score"] for p in population if p["stage"] == 0),
                   f"bo_best_{metric}": max(bo_found) if bo_found else None,
                   "bo_evaluated": len(bo_found), "bo_proposed": self.stats["proposed"],
                   "bo_invalid": self.stats["invalid"], "bo_repeats": self.stats["repeats"],
                   "bo_rejected": self.stats.get("rejected", 0), **extra, **self.cost_metrics(best)}
        if self._cost_model is not None:
            self._cost_model.close()
        arch = Arch(self.space.name, best["arch"], meta={"strategy": self.name, "stage": best["stage"]})
        return SearchResult(arch, metrics)
