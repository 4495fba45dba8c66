"""``mechanism-search``: DARTFormer's search over attention mechanisms (Brown et al. 2022, Sec. 3.1-3.3).

1. **Supernet** (Sec. 3.1-3.2): one encoder layer whose attention is the fixed-alpha
   average of a candidate block per mechanism (``mode: homogeneous``) or of ``H``
   single-head blocks per mechanism (``nas-one-shot``, ``nas-prune``), trained like any
   network "until convergence": up to ``supernet.epochs`` epochs with early stopping on
   the validation accuracy (``supernet.patience``), keeping the best-validation weights.
   No architecture weights, no bi-level optimisation.
2. **Masked-drop scoring** (Wang et al. 2021): the score of block ``j`` is the
   validation accuracy with every active block minus the accuracy with block ``j``'s
   output zeroed, measured in eval mode with random features and hash rotations frozen
   (:mod:`attnas.strategies._mechanism_selection`).
3. **Selection**: ``homogeneous`` (Sec. 3.3.1) picks the highest-scoring mechanism;
   ``nas-one-shot`` (Sec. 3.3.2) keeps the ``H`` highest-scoring single heads of one
   trial; ``nas-prune`` drops the lowest-scoring head, fine-tunes for
   ``finetune_steps`` optimiser steps, rescores, until ``H`` heads remain.

The result is ``{"mechanism": name}`` or ``{"mechanism": {name: heads}}`` of the
``attention-mechanisms`` space; the pipeline then trains it as an ordinary Transformer
(homogeneous) or with the cell stacked in every layer (heterogeneous) from scratch, with
the recipe's ``retrain`` settings (``retrain.init: scratch``: the one-layer supernet has
no weights for a deeper model).

Checkpoints: ``supernet`` (every ``supernet.checkpoint_every`` epochs, then a final one
holding the best weights), ``selection`` (homogeneous, NAS One-shot) and ``prune`` (after
every NAS Prune round, holding the pruned supernet, optimiser, batch order and RNG).
Events: ``supernet`` (epoch, loss, val), ``scoring`` (one per scored block: ``round``,
``index``, ``block``, ``drop_score``, ``masked_accuracy`` = validation accuracy with the
block masked, ``base``; no key named after the metric, so ``attnas report`` does not plot
them as candidates whose best is the highest — here the lowest masked accuracy marks
the strongest block), ``prune`` (round, dropped block, heads left).

``metrics.json`` gets ``drop_score_<block>`` for every block of the first trial (block
names are mechanism names in the homogeneous search, ``mechanism/i`` in the
heterogeneous one), ``selection`` (kept and dropped blocks and every trial's scores),
``supernet_val_accuracy``, ``supernet_epochs``, ``search_mode`` and ``search_seconds``.

**Costs**: after the selection every candidate mechanism's ``report_costs``
(default parameters and forward latency, :mod:`attnas.costs.measure`) are measured on its
homogeneous standalone network (the model a homogeneous search would retrain) at the
run's input size (the first ``train`` batch at ``costs.batch_size``, default
``supernet.optim.batch_size``: the run's sequence length), cached in ``costs.jsonl``.
``metrics.json`` gets ``mechanism_costs`` (``{mechanism: {cost: value}}``),
``mechanism_costs_input`` (the batch's shapes), ``costs_seconds`` and, with
``latency_ms``, ``costs_latency`` (how it was timed: ``network``, what ``costs.latency:
auto`` resolves to here, since these networks do not split into parts); ``attnas
report`` puts them beside the drop scores (:mod:`attnas.reporting.report_mechanisms`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from attnas.config import CheckedConfig, NonNegativeInt, OptimConfig, PositiveInt, TrainConfig, moved_into, with_defaults
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError, check_finite_loss, unknown_name
from attnas.costs.config import COSTS, CostsConfig
from attnas.costs.cost_model import CostModel
from attnas.registry import register_strategy
from attnas.reporting.progress import progress
from attnas.runs.resumable_phase import ResumablePhase, Slot
from attnas.runs.rng import seed_everything
from attnas.strategies._mechanism_selection import (
    DropScores,
    SelectionResult,
    Trial,
    masked_drop_scores,
    nas_one_shot,
    nas_prune,
    select_homogeneous,
    sweep_trial,
)
from attnas.strategies.base import SearchResult, Strategy
from attnas.tasks.base import SplitTensorsTask
from attnas.training.train import fit, make_optimizer


#: The supernet's optimiser options: :class:`~attnas.config.OptimConfig`'s fields, with
#: DARTFormer's defaults (AdamW, lr 5e-4, weight decay 0.1, batches of 32).
SupernetOptimConfig = with_defaults(
    OptimConfig, "SupernetOptimConfig",
    "The optimiser of the ``mechanism-search`` supernet (:class:`~attnas.config.OptimConfig`, "
    "defaults AdamW, lr 5e-4, weight decay 0.1, batch size 32).",
    lr=5e-4, weight_decay=0.1, optimizer="adamw", batch_size=32)


@dataclass(frozen=True)
class SupernetTrainingConfig(CheckedConfig):
    """How the fixed-alpha supernet is trained "to convergence".

    Attributes:
        epochs: At most this many epochs.
        patience: Stop after this many epochs without a better validation accuracy (0: never).
        optim: The optimiser (:class:`~attnas.config.OptimConfig`'s fields: ``lr``,
            ``weight_decay``, ``optimizer``, ``momentum``, ``scheduler``, ``lr_min``,
            ``batch_size`` -- also of the NAS Prune fine-tuning -- and ``grad_clip``;
            defaults AdamW, lr 5e-4, weight decay 0.1, batch size 32). Given flat (the
            shape before this section, ``supernet: {lr: 0.001}``), they are read as
            ``optim.<key>``.
        eval_every: Validation every this many epochs.
        checkpoint_every: Epochs between checkpoints.
        path_keep: Blocks run per training step, drawn uniformly, the others masked as in
            scoring (path dropout, Bender et al. 2018; ``1``: single-path sampling, Guo et
            al. 2020). ``0`` (DARTFormer): every block on every step.
    """

    epochs: PositiveInt = 20
    patience: NonNegativeInt = 3
    optim: SupernetOptimConfig = field(default_factory=SupernetOptimConfig)
    eval_every: PositiveInt = 1
    checkpoint_every: PositiveInt = 1
    path_keep: NonNegativeInt = 0

    moved_keys = moved_into(OptimConfig, "optim")

    def train_config(self) -> TrainConfig:
        """The same settings as a :class:`~attnas.config.TrainConfig` for :func:`attnas.training.train.fit`."""
        return TrainConfig(**self.optim.optim_options(), epochs=self.epochs, patience=self.patience,
                           init="scratch", eval_every=self.eval_every)


@dataclass(frozen=True)
class MechanismSearchConfig(CheckedConfig):
    """Options of ``mechanism-search``.

    Attributes:
        mode: ``homogeneous`` (Sec. 3.3.1), ``nas-one-shot`` or ``nas-prune`` (Sec. 3.3.2).
        supernet: Supernet training.
        finetune_steps: NAS Prune: optimiser steps on training batches after each drop.
        score_batch_size: Batch size of masked-drop scoring (0: ``supernet.optim.batch_size``).
        report_costs: Costs of every candidate mechanism to measure and report
            (:data:`attnas.costs.config.COSTS`; empty: none).
        costs: How they are measured (:class:`~attnas.costs.config.CostsConfig`; the example
            batch defaults to ``supernet.optim.batch_size``).
    """

    mode: Literal["homogeneous", "nas-one-shot", "nas-prune"] = "homogeneous"
    supernet: SupernetTrainingConfig = field(default_factory=SupernetTrainingConfig)
    finetune_steps: NonNegativeInt = 100
    score_batch_size: NonNegativeInt = 0
    report_costs: tuple[str, ...] = ("params", "latency_ms")
    costs: CostsConfig = field(default_factory=CostsConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in self.report_costs:
            if name not in COSTS:
                raise ConfigError("report_costs: " + unknown_name("cost", name, COSTS))


def random_calls(model: nn.Module) -> list[int]:
    """Training-call counters of every block that redraws random structure (for checkpoints)."""
    return [int(m._training_calls) for m in model.modules() if hasattr(m, "_training_calls")]


def set_random_calls(model: nn.Module, calls: list[int]) -> None:
    """Restore counters captured by :func:`random_calls` (so redraws happen on the same steps)."""
    blocks = [m for m in model.modules() if hasattr(m, "_training_calls")]
    for m, c in zip(blocks, calls):
        m._training_calls = int(c)


def _random_calls_slot(model: nn.Module) -> Slot:
    """The counters of :func:`random_calls` as a checkpointed :class:`~attnas.runs.resumable_phase.Slot`."""
    return Slot(lambda: random_calls(model), lambda calls: set_random_calls(model, calls))


def _trial_from_dict(d: dict) -> DropScores:
    return DropScores(float(d["base_accuracy"]), {k: float(v) for k, v in d["scores"].items()})


@register_strategy("mechanism-search")
class MechanismSearch(Strategy):
    """DARTFormer: fixed-alpha supernet of attention blocks, masked-drop selection (homogeneous, NAS One-shot, NAS Prune)."""

    name = "mechanism-search"
    Config = MechanismSearchConfig
    requires = ("mechanism-supernet",)

    @classmethod
    def check(cls, options: MechanismSearchConfig, space: Any) -> None:
        """Refuse a space with fewer than two candidate mechanisms (nothing to choose from)."""
        candidates = getattr(space.options, "candidates", ())
        if len(candidates) < 2:
            raise ConfigError(f"strategy '{cls.name}': the space has {len(candidates)} candidate mechanism(s), "
                              f"nothing to choose from; list at least two in space.candidates")

    @classmethod
    def counterpart_space(cls, options: MechanismSearchConfig, space: Any) -> dict:
        """Random search draws what this mode returns: one mechanism for every layer
        (``homogeneous``) or a cell of ``heads`` single heads (``nas-one-shot``,
        ``nas-prune``), whatever the recipe's ``space.layout``."""
        return {"layout": "homogeneous" if options.mode == "homogeneous" else "heterogeneous"}

    @classmethod
    def search_epochs(cls, options: MechanismSearchConfig) -> int:
        """The supernet's ``epochs`` (at most; its early stopping may end it sooner)."""
        return options.supernet.epochs

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.elapsed = 0.0
        self._scored = 0  # scoring events logged so far (their running index)
        self._rounds = 0  # masked trials run so far

    @property
    def supernet_mode(self) -> str:
        """``homogeneous`` or ``heterogeneous`` (the supernet the mode needs)."""
        return "homogeneous" if self.options.mode == "homogeneous" else "heterogeneous"

    # ------------------------------------------------------------------ supernet

    def _build_supernet(self) -> nn.Module:
        seed_everything(self.seed)
        model = self.space.supernet(self.task, mode=self.supernet_mode).to(self.device)
        model.path_keep = self.options.supernet.path_keep
        return model

    def train_supernet(self) -> tuple[nn.Module, dict]:
        """Train (or resume, or reload) the supernet; returns it with the best-validation weights."""
        cfg = self.options.supernet
        metric = self.task.metric
        model = self._build_supernet()
        phase = ResumablePhase(self.run, "supernet", {"model": model, "random_calls": _random_calls_slot(model)},
                               elapsed=self.elapsed, when_done=("model", "random_calls"))
        if phase.load() and phase.done:
            phase.restore()
            self.elapsed = phase.elapsed
            return model, dict(phase.data["summary"])

        def log(ev: dict) -> None:
            self.run.log({"phase": "supernet", **ev})

        res = fit(model, self.task, cfg.train_config(), seed=self.seed, desc="supernet training", log=log,
                  phase=phase, checkpoint_every=cfg.checkpoint_every, score_test=False)
        self.elapsed = phase.elapsed
        summary = {f"supernet_val_{metric}": res.val, "supernet_epochs": res.epochs,
                   "supernet_best_epoch": res.best_epoch}
        phase.save(cfg.epochs + 1, done=True, summary=summary)
        return model, summary

    # ------------------------------------------------------------------ scoring

    def _score_batches(self):
        bs = self.options.score_batch_size or self.options.supernet.optim.batch_size
        return lambda: self.task.batches("val", batch_size=bs)

    def trial(self) -> Trial:
        """One masked-drop trial of the active blocks, logging a ``scoring`` event per block."""
        metric = self.task.metric
        if metric == "accuracy":
            count = getattr(self.task, "count_correct", None) or SplitTensorsTask.count_correct  # one per example
            base_trial = sweep_trial(self._score_batches(), count)
        else:  # a task with another metric: one full evaluation per masking pattern
            bs = self.options.score_batch_size or self.options.supernet.optim.batch_size
            evaluate = lambda m: self.task.evaluate(m, "val", batch_size=bs)  # noqa: E731
            base_trial = lambda m: masked_drop_scores(m, evaluate)  # noqa: E731

        def run(model: Any) -> DropScores:
            scores = base_trial(model)
            for name, s in scores.scores.items():
                self.run.log({"phase": "scoring", "round": self._rounds, "index": self._scored, "block": name,
                              "drop_score": s, f"masked_{metric}": scores.base - s, "base": scores.base})
                self._scored += 1
            self._rounds += 1
            return scores

        return run

    # ------------------------------------------------------------------ selection

    def select_once(self, model: nn.Module) -> tuple[SelectionResult, Any]:
        """Homogeneous choice or NAS One-shot: one trial (resumable: reloads a finished selection)."""
        ck = self.run.load_checkpoint("selection")
        if ck is not None and ck["state"].get("done"):
            st = ck["state"]
            result = SelectionResult(list(st["kept"]), list(st["dropped"]), [_trial_from_dict(t) for t in st["trials"]])
            self.elapsed = st["elapsed"]
            return result, st["arch"]
        t0 = time.time() - self.elapsed
        if self.options.mode == "homogeneous":
            winner, scores = select_homogeneous(model, trial=self.trial())
            result = SelectionResult([winner], [n for n in reversed(scores.ranking()) if n != winner], [scores])
            kept: Any = winner
        else:
            result = nas_one_shot(model, keep=self.space.options.heads, trial=self.trial())
            kept = model.kept()
        self.elapsed = time.time() - t0
        self.run.save_checkpoint("selection", 1, {"done": True, **result.to_dict(), "arch": kept,
                                                  "elapsed": self.elapsed})
        return result, kept

    def prune(self, model: nn.Module) -> tuple[SelectionResult, Any]:
        """NAS Prune, one checkpoint per round (a resumed run continues with the heads left)."""
        sn = self.options.supernet
        keep = self.space.options.heads
        task = self.task
        params = [p for p in model.parameters() if p.requires_grad]
        opt = make_optimizer(params, sn.optim)
        gen = torch.Generator().manual_seed(self.seed + 1)
        trials: list[DropScores] = []
        dropped: list[str] = []
        phase = ResumablePhase(self.run, "prune", {"model": model, "optimizer": opt, "generator": gen,
                                                   "random_calls": _random_calls_slot(model)}, elapsed=self.elapsed)
        if phase.resume():
            st = phase.data
            trials = [_trial_from_dict(t) for t in st["trials"]]
            dropped = list(st["dropped"])
            self.elapsed = phase.elapsed
            self._rounds = len(trials)
            self._scored = sum(len(t.scores) for t in trials)
            if phase.done:
                return SelectionResult(list(model.active_names), dropped, trials), model.kept()
        phase.start()
        batches = None
        finetune_steps = 0  # in this process, for the message of a NaN loss

        def train_step(m: nn.Module) -> None:
            nonlocal batches, finetune_steps
            if batches is None:
                batches = task.batches("train", shuffle=True, generator=gen, batch_size=sn.optim.batch_size)
            batch = next(batches, None)
            if batch is None:  # a new pass over the training set
                batches = task.batches("train", shuffle=True, generator=gen, batch_size=sn.optim.batch_size)
                batch = next(batches)
            opt.zero_grad(set_to_none=True)
            loss = task.loss(m(batch), batch)
            finetune_steps += 1
            check_finite_loss(loss, "prune", f"fine-tuning step {finetune_steps} of this process")
            loss.backward()
            if sn.optim.grad_clip > 0:
                nn.utils.clip_grad_norm_(params, sn.optim.grad_clip)
            opt.step()

        total_rounds = len(model.active_names) - keep + len(dropped)
        with progress("pruning heads", total_rounds, completed=len(dropped)) as bar:

            def on_round(res: SelectionResult) -> None:
                nonlocal batches
                batches = None  # every round starts a fresh pass, so a resumed round draws the same batches
                all_dropped = dropped + res.dropped
                done = len(res.kept) <= keep
                self.run.log({"phase": "prune", "round": len(all_dropped), "dropped": res.dropped[-1],
                              "heads_left": len(res.kept), "base": res.trials[-1].base})
                phase.save(len(all_dropped), done=done, trials=[t.to_dict() for t in trials + res.trials],
                           dropped=all_dropped)
                bar.advance(1, dropped=res.dropped[-1])

            model.train()
            res = nas_prune(model, train_step, keep=keep, finetune_steps=self.options.finetune_steps,
                            on_round=on_round, trial=self.trial())
        self.elapsed = phase.elapsed
        return SelectionResult(list(model.active_names), dropped + res.dropped, trials + res.trials), model.kept()

    # ------------------------------------------------------------------ costs

    def mechanism_costs(self) -> dict:
        """``mechanism_costs`` (``{mechanism: {cost: value}}``), ``mechanism_costs_input``,
        ``costs_seconds`` and, with ``latency_ms``, ``costs_latency`` (the latency method,
        ``auto`` resolved) of every candidate's homogeneous network (``{}`` without
        ``report_costs``); measured once, cached in the run directory."""
        names = list(self.options.report_costs)
        if not names:
            return {}
        model = CostModel(self.space, self.task, self.run, self.options.costs,
                          default_batch_size=self.options.supernet.optim.batch_size)
        try:
            costs = {m: model.costs(self.space.arch({"mechanism": m}), names) for m in self.space.options.candidates}
            context = model.context()
        finally:
            model.close()
        how = {"costs_latency": context["protocol"]["latency"]} if "latency_ms" in names else {}
        return {"mechanism_costs": costs, "mechanism_costs_input": context["input"],
                "costs_seconds": round(model.total_seconds, 2), **how}

    # ------------------------------------------------------------------ the search

    def search(self) -> SearchResult:
        model, summary = self.train_supernet()
        if self.options.mode == "nas-prune":
            result, kept = self.prune(model)
        else:
            result, kept = self.select_once(model)
        first = result.trials[0]
        metrics = {"search_mode": self.options.mode, **summary,
                   **{f"drop_score_{name}": s for name, s in first.scores.items()},
                   "selection": result.to_dict(), "search_seconds": round(self.elapsed, 2),
                   **self.mechanism_costs()}
        arch = self.space.arch_from_kept(kept)
        arch = Arch(arch.space, arch.choices, meta={"strategy": self.name, "mode": self.options.mode})
        return SearchResult(arch, metrics)

    def initial_model(self, arch: Arch) -> nn.Module | None:
        """None: the one-layer supernet has no weights for the stacked model (trained from scratch)."""
        warnings.warn("mechanism-search: retrain.init 'supernet' is not supported (the one-layer supernet has no "
                      "weights for the stacked model); training from scratch", stacklevel=2)
        return None
