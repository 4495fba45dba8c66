"""``darts``: first-order differentiable architecture search (DARTS; AutoLA Sec. 3.3, 4.2).

The space's continuous relaxation (:meth:`~attnas.spaces.base.Space.relaxed`: a network whose
``arch_parameters()`` -- the architecture weights ``alpha`` -- are kept apart from its
``weight_parameters()``) is trained by alternating two steps on two disjoint halves of the
training data (AutoLA Eq. 15 with the first-order approximation of Liu et al., 2019):

* a weight step on a batch of ``train_A``: SGD (momentum 0.9, weight decay 3e-4, cosine
  learning rate 0.025 -> 0.001 over the epochs, gradient norm clipped at 5);
* an architecture step on a batch of ``train_B``: Adam on ``alpha`` only (lr 3e-4,
  betas (0.5, 0.999), weight decay 1e-3, as DARTS does), the gradient taken with
  ``loss.backward(inputs=alpha)`` so no weight gradient is computed.

At the end the space derives the discrete architecture (:meth:`~attnas.spaces.base.Space.derive`:
for the HOGA space the most likely operation per edge, Eqs. 14 and 16). The found
architecture is retrained from scratch by the pipeline (:meth:`Darts.initial_model` is
``None``), as AutoLA does.

**The bilevel-split protocol.** A task that supports bilevel search names the two halves in
a class attribute ``bilevel_splits = (weight_split, arch_split)``: two disjoint splits of its
training data accepted by ``task.batches`` (the image-classification task has
``("train_a", "train_b")``: its ``train`` split cut at random into halves). The strategy's
``splits`` option overrides it (e.g. ``[train, val]`` for a task without halves, the original
DARTS protocol). The relaxed network is scored on the task's ``val`` split after every epoch.

**Events and checkpoints.** After every epoch the phase logs ``{"phase": "darts", "epoch",
"loss" (train_A), "arch_loss" (train_B), "val" (relaxed network), "arch" (the architecture
derived now), "alpha" (``softmax(alpha)``, when it has at most 400 entries)}`` and, every
``checkpoint_every`` epochs, checkpoints the weights, ``alpha``, both optimisers, the
schedule, the two batch-order generators and every RNG, so a killed search resumes exactly.

**Data-parallel (``torchrun``, :mod:`attnas.distributed`).** Every rank builds the same
relaxed network (rank 0's weights and ``alpha`` are broadcast), draws the same batch order of
both splits, takes its share of each group of ``world_size`` batches
(:meth:`~attnas.distributed.DistContext.shard`), and averages the weight gradients before
clipping and the architecture gradients before the Adam step, so a step on ``W`` ranks is
a step of one process on the union of their batches (tested with gloo in
``tests/test_distributed.py``). Ranks check at every checkpoint that they hold the same
``alpha``; rank 0 alone writes, derives the architecture and retrains it. Batch-norm
statistics are those of each rank's part (as with ``DistributedDataParallel`` without
``SyncBatchNorm``, which PyTorch supports on GPUs only).

**Reuse (extension points).** Other differentiable searches build on :class:`Darts`:

* ``alpha_init`` (``space`` default, ``normal`` with ``alpha_init_scale``, or ``zeros``),
  ``arch_lr`` / ``arch_betas`` / ``arch_weight_decay``: the architecture optimiser;
* ``alpha_from``: start ``alpha`` from another run's (a run directory whose checkpoint tag
  ``alpha_from_tag`` holds ``alpha``, e.g. the ``darts`` or ``pretext`` phase of a finished
  search), e.g. a classification fine-tuning run after a self-supervised search run;
* :meth:`Darts.pretext`: a hook run before the main phase (default: nothing).
  A subclass overrides it to train the relaxed network (or an encoder-decoder around it) on
  a pretext objective first, with :meth:`Darts.run_phase` and its own :class:`BilevelPhase`
  (own tag, loss, model, epochs, architecture learning rate): the loop, checkpoints and
  resume come for free. The main phase then starts from the ``alpha`` the pretext left.
  This is how the full-attention search (context auto-regression, then classification with
  ``alpha`` from it and Adam lr 1e-4) is meant to extend it, e.g.::

      @dataclass(frozen=True)
      class CarDartsConfig(DartsConfig):          # adds the pretext's own options
          pretext_epochs: int = 50
          pretext_arch_lr: float = 3e-4

      @register_strategy("car-darts")
      class CarDarts(Darts):
          Config = CarDartsConfig

          def pretext(self, model):
              encdec = Reconstructor(model)        # model as encoder + an up-sampling decoder
              phase = BilevelPhase(tag="pretext", module=encdec,
                                   weights=[*model.weight_parameters(), *encdec.decoder.parameters()],
                                   alpha=list(model.arch_parameters()), loss=masked_l1(encdec),
                                   splits=bilevel_splits(self.task, self.options.splits),
                                   epochs=self.options.pretext_epochs, arch_lr=self.options.pretext_arch_lr)
              s = self.run_phase(phase)
              return {"pretext_loss": s["loss"], "pretext_seconds": s["seconds"]}

  with ``alpha_init: zeros`` and ``arch_lr: 1e-4`` in its recipe (the fine-tuning phase).
"""

from __future__ import annotations

import dataclasses
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

import torch
from torch import nn

from attnas import distributed
from attnas._registry import register_strategy
from attnas.build import first_batch
from attnas.config import Fraction, NonNegativeFloat, PositiveFloat, PositiveInt
from attnas.errors import CheckpointError, ConfigError, DataError, RunDirError, UnsupportedError, check_finite_loss
from attnas.progress import progress
from attnas.rng import rng_state, seed_everything, set_rng_state
from attnas.runs import RunDir
from attnas.strategies.base import SearchResult, Strategy

ALPHA_EVENT_LIMIT = 400  # log softmax(alpha) in the epoch events when it has at most this many entries


@dataclass(frozen=True)
class DartsConfig:
    """Options of ``darts`` (defaults: AutoLA Sec. 4.2 and DARTS).

    Attributes:
        epochs: Search epochs (one epoch = one pass over the weight split; 100 in AutoLA).
        batch_size: Mini-batch size of both steps (128 in AutoLA).
        lr: Initial learning rate of the weights (SGD, cosine-annealed).
        lr_min: Final learning rate of the cosine schedule.
        momentum: SGD momentum.
        weight_decay: SGD weight decay.
        grad_clip: Max norm of the weight gradient (0: no clipping; DARTS clips at 5).
        arch_lr: Adam learning rate of ``alpha``.
        arch_betas: Adam betas of ``alpha``.
        arch_weight_decay: Adam weight decay of ``alpha``.
        alpha_init: ``space`` keeps the space's initialisation (HOGA: ``N(0, 1) * 1e-3``);
            ``normal`` draws ``N(0, 1) * alpha_init_scale``; ``zeros`` starts from uniform
            mixing.
        alpha_init_scale: Scale of the ``normal`` initialisation.
        alpha_from: A run directory whose ``alpha`` starts this search (overrides
            ``alpha_init``); empty: none.
        alpha_from_tag: The checkpoint tag in ``alpha_from`` that holds ``alpha``.
        splits: ``[weight_split, arch_split]``; null: the task's ``bilevel_splits``.
        eval_split: Split the relaxed network is scored on after each epoch (empty: never).
        checkpoint_every: Epochs between checkpoints.
    """

    epochs: PositiveInt = 100
    batch_size: PositiveInt = 128
    lr: PositiveFloat = 0.025
    lr_min: NonNegativeFloat = 0.001
    momentum: NonNegativeFloat = 0.9
    weight_decay: NonNegativeFloat = 3e-4
    grad_clip: NonNegativeFloat = 5.0
    arch_lr: PositiveFloat = 3e-4
    arch_betas: tuple[Fraction, ...] = (0.5, 0.999)
    arch_weight_decay: NonNegativeFloat = 1e-3
    alpha_init: Literal["space", "normal", "zeros"] = "space"
    alpha_init_scale: NonNegativeFloat = 1e-3
    alpha_from: str = ""
    alpha_from_tag: str = "darts"
    splits: Optional[tuple[str, ...]] = None
    eval_split: str = "val"
    checkpoint_every: PositiveInt = 1

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: must be >= 1, got {getattr(self, name)}")
        for name in ("lr", "arch_lr"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}: must be > 0, got {getattr(self, name)}")
        if not 0 <= self.lr_min <= self.lr:
            raise ConfigError(f"lr_min: must be in [0, lr={self.lr}], got {self.lr_min}")
        for name in ("momentum", "weight_decay", "grad_clip", "arch_weight_decay", "alpha_init_scale"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: must be >= 0, got {getattr(self, name)}")
        if len(self.arch_betas) != 2 or not all(0 <= b < 1 for b in self.arch_betas):
            raise ConfigError(f"arch_betas: expected two numbers in [0, 1), got {list(self.arch_betas)}")
        if self.splits is not None:
            if len(self.splits) != 2 or self.splits[0] == self.splits[1]:
                raise ConfigError(f"splits: expected two different split names [weights, architecture], "
                                  f"got {list(self.splits)}")


def bilevel_splits(task: Any, override: tuple[str, ...] | None = None) -> tuple[str, str]:
    """The ``(weight split, architecture split)`` of ``task`` (see the module docstring).

    Raises:
        UnsupportedError: When the task declares no ``bilevel_splits`` and none are given.
    """
    if override is not None:
        return override[0], override[1]
    splits = getattr(task, "bilevel_splits", None)
    if not splits:
        raise UnsupportedError(
            f"task '{getattr(task, 'name', type(task).__name__)}' has no bilevel splits for DARTS: give "
            f"strategy.splits=[weight_split, arch_split] (e.g. [train, val]) or add a `bilevel_splits` "
            f"attribute to the task")
    a, b = splits
    return a, b


def _check_parameters(model: nn.Module, space_name: str) -> None:
    alpha = list(model.arch_parameters())
    ids = {id(p) for p in alpha}
    if not alpha or any(id(p) in ids for p in model.weight_parameters()):
        raise UnsupportedError(f"space '{space_name}': its relaxed network must expose disjoint, "
                               f"non-empty arch_parameters() and weight_parameters()")


@dataclass
class BilevelPhase:
    """One alternating weight / architecture optimisation, as :meth:`Darts.run_phase` runs it.

    Attributes:
        tag: Checkpoint tag and event ``phase``.
        module: The module whose ``state_dict`` is checkpointed (holds weights and ``alpha``).
        weights: Parameters of the weight step.
        alpha: Parameters of the architecture step.
        loss: ``batch -> scalar loss`` (used by both steps).
        splits: ``(weight split, architecture split)`` of the task.
        epochs: Passes over the weight split.
        arch_lr: Adam learning rate of ``alpha`` in this phase.
        evaluate: Extra per-epoch event fields (e.g. ``{"val": accuracy}``), or ``None``.
        describe: More per-epoch event fields (e.g. ``{"arch": choices}``), or ``None``.
    """

    tag: str
    module: nn.Module
    weights: list
    alpha: list
    loss: Callable[[Any], torch.Tensor]
    splits: tuple[str, str]
    epochs: int
    arch_lr: float
    evaluate: Optional[Callable[[], dict]] = None
    describe: Optional[Callable[[], dict]] = None
    summary: dict = field(default_factory=dict)


@register_strategy("darts")
class Darts(Strategy):
    """First-order DARTS: weights on train_A, architecture weights on train_B (AutoLA Sec. 3.3)."""

    name = "darts"
    Config = DartsConfig
    requires = ("relaxed",)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.elapsed = 0.0

    # ------------------------------------------------------------------ checks before the run

    @classmethod
    def check(cls, options: DartsConfig, space: Any) -> None:
        """Refuse an ``alpha_from`` that is not a run holding architecture weights under ``alpha_from_tag``."""
        if options.alpha_from:
            try:
                load_alpha(options.alpha_from, options.alpha_from_tag)
            except RunDirError as exc:
                raise RunDirError(f"strategy.alpha_from: {exc}") from None

    @classmethod
    def check_task(cls, options: DartsConfig, space: Any, task: Any) -> None:
        """Refuse splits the task lacks, and a relaxed network the search cannot use.

        Draws one batch of each split the search reads and builds the relaxed network
        once (the random generators are left as they were).
        """
        weight_split, arch_split = bilevel_splits(task, options.splits)
        for key, split in (("splits", weight_split), ("splits", arch_split), ("eval_split", options.eval_split)):
            if not split:
                continue
            try:
                batch = first_batch(task, split)
            except ConfigError as exc:
                raise ConfigError(f"strategy.{key}: {exc}") from None
            if batch is None:
                raise DataError(f"strategy.{key}: the task's '{split}' split is empty")
        saved = rng_state()
        try:
            model = space.relaxed(task)
        finally:
            set_rng_state(saved)
        cls.check_relaxed(options, space, task, model)

    @classmethod
    def check_relaxed(cls, options: DartsConfig, space: Any, task: Any, model: nn.Module) -> None:
        """Refuse a relaxed network ``model`` of ``space`` the search cannot train.

        Raises:
            UnsupportedError: When its architecture and weight parameters are not disjoint
                and non-empty.
            CheckpointError: When ``alpha_from``'s architecture weights do not fit it.
        """
        _check_parameters(model, space.name)
        if options.alpha_from:
            load_alpha(options.alpha_from, options.alpha_from_tag, [tuple(p.shape) for p in model.arch_parameters()])

    # ------------------------------------------------------------------ building blocks

    def build_relaxed(self) -> nn.Module:
        """The space's relaxed network, built after seeding (a resume rebuilds it identically)."""
        seed_everything(self.seed)
        model = self.space.relaxed(self.task).to(self.device)
        _check_parameters(model, self.space.name)
        return model

    @torch.no_grad()
    def init_alpha(self, model: nn.Module) -> None:
        """Apply ``alpha_init`` and ``alpha_from`` to a freshly built relaxed network."""
        o = self.options
        alpha = list(model.arch_parameters())
        if o.alpha_init == "normal":
            gen = torch.Generator().manual_seed(self.seed)
            for p in alpha:
                p.copy_(o.alpha_init_scale * torch.randn(p.shape, generator=gen))
        elif o.alpha_init == "zeros":
            for p in alpha:
                p.zero_()
        if o.alpha_from:
            for p, q in zip(alpha, load_alpha(o.alpha_from, o.alpha_from_tag, [tuple(p.shape) for p in alpha])):
                p.copy_(q)

    def pretext(self, model: nn.Module) -> dict:
        """Hook run before the main phase (default: nothing).

        Override to train ``model`` (weights and/or ``alpha``) on another objective first,
        e.g. with :meth:`run_phase` and a :class:`BilevelPhase` of its own tag (a finished
        phase only reloads its final state, so calling it again on resume is cheap; the main
        phase then loads its own checkpoint over it). Returns metrics merged into the
        search's; a ``pretext_seconds`` entry is added to ``search_seconds``.
        """
        return {}

    def classification_phase(self, model: nn.Module) -> BilevelPhase:
        """The main phase: the task's loss, ``val`` scored and the architecture derived per epoch."""
        o, task = self.options, self.task

        def evaluate() -> dict:
            if not o.eval_split:
                return {}
            model.eval()
            try:
                return {"val": task.evaluate(model, o.eval_split)}
            finally:
                model.train()

        def describe() -> dict:
            out: dict = {"arch": self.space.derive(model).choices}
            alpha = list(model.arch_parameters())
            if sum(p.numel() for p in alpha) <= ALPHA_EVENT_LIMIT:
                probs = [torch.softmax(p.detach().float().cpu(), dim=-1) for p in alpha]
                out["alpha"] = [[[round(v, 4) for v in row] for row in p.reshape(-1, p.shape[-1]).tolist()]
                                for p in probs]
            return out

        return BilevelPhase(tag="darts", module=model, weights=list(model.weight_parameters()),
                            alpha=list(model.arch_parameters()), loss=lambda batch: task.loss(model(batch), batch),
                            splits=bilevel_splits(task, o.splits), epochs=o.epochs, arch_lr=o.arch_lr,
                            evaluate=evaluate, describe=describe)

    # ------------------------------------------------------------------ the loop

    def _batches(self, split: str, gen: torch.Generator) -> Iterator[Any]:
        return self.task.batches(split, shuffle=True, generator=gen, batch_size=self.options.batch_size)

    def run_phase(self, phase: BilevelPhase) -> dict:
        """Run (or resume, or skip when finished) one bilevel phase; returns its summary.

        The summary holds the last epoch's event fields (``loss``, ``arch_loss``, ``val``...)
        and ``seconds`` (wall time of the phase, summed over resumes).
        """
        o = self.options
        ck = self.run.load_checkpoint(phase.tag)
        if ck is not None and ck["state"].get("done"):
            st = ck["state"]
            phase.module.load_state_dict(st["model"])
            set_rng_state(st["rng"])
            phase.summary = dict(st["summary"])
            return phase.summary
        # foreach: the same arithmetic as the per-parameter loop in a few multi-tensor kernels (a
        # supernet has hundreds of small parameters; PyTorch uses the loop by default on the CPU)
        w_opt = torch.optim.SGD(phase.weights, lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay,
                                foreach=True)
        a_opt = torch.optim.Adam(phase.alpha, lr=phase.arch_lr, betas=tuple(o.arch_betas),
                                 weight_decay=o.arch_weight_decay, foreach=True)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(w_opt, T_max=max(1, phase.epochs), eta_min=o.lr_min)
        base = zlib.crc32(phase.tag.encode()) + 7919 * self.seed
        gen_a, gen_b = torch.Generator().manual_seed(base), torch.Generator().manual_seed(base + 1)
        start, seconds, last = 0, 0.0, {}
        if ck is not None:
            st = ck["state"]
            phase.module.load_state_dict(st["model"])
            w_opt.load_state_dict(st["w_opt"])
            a_opt.load_state_dict(st["a_opt"])
            sched.load_state_dict(st["scheduler"])
            gen_a.set_state(st["gen_a"])
            gen_b.set_state(st["gen_b"])
            set_rng_state(st["rng"])
            start, seconds, last = ck["step"], st["seconds"], dict(st["summary"])
        split_a, split_b = phase.splits
        module, task = phase.module, self.task
        dist = distributed.current()  # data-parallel (torchrun): each rank takes its share of both streams
        if dist is not None:
            dist.broadcast_module(module)  # every rank starts from rank 0's weights and alpha

        def stream(split: str, gen: torch.Generator) -> Iterator[tuple[Any, float]]:
            batches = self._batches(split, gen)  # the same order on every rank (same generator state)
            return dist.shard(batches) if dist is not None else ((b, 1.0) for b in batches)

        def step(batch: Any, share: float, params: list) -> float:
            """Back-propagate the loss of ``batch`` into ``params`` (averaged over ranks); its value."""
            loss = phase.loss(batch)
            if dist is not None:
                loss, value = dist.step_loss(loss, share)  # raises on every rank when not finite
            else:  # the epoch and step of the loop below
                value = check_finite_loss(loss, phase.tag, f"epoch {epoch}, step {steps + 1}", "lower strategy.lr?")
            loss.backward(inputs=params)
            if dist is not None:
                dist.average_gradients(params)
            return value

        t0 = time.time() - seconds
        module.train()
        with progress(f"{phase.tag} search", phase.epochs, completed=start) as bar:
            for epoch in range(start + 1, phase.epochs + 1):
                w_total = a_total = 0.0
                steps = 0
                b_iter = stream(split_b, gen_b)
                for batch_a, share_a in stream(split_a, gen_a):
                    # weight step on train_A
                    w_opt.zero_grad(set_to_none=True)
                    w_total += step(batch_a, share_a, phase.weights)
                    if o.grad_clip > 0:
                        nn.utils.clip_grad_norm_(phase.weights, o.grad_clip)
                    w_opt.step()
                    # architecture step on train_B (restart its pass when it runs out first)
                    part_b = next(b_iter, None)
                    if part_b is None:
                        b_iter = stream(split_b, gen_b)
                        part_b = next(b_iter)
                    a_opt.zero_grad(set_to_none=True)
                    a_total += step(*part_b, phase.alpha)
                    a_opt.step()
                    steps += 1
                lr = w_opt.param_groups[0]["lr"]  # the rate this epoch used
                sched.step()
                event = {"epoch": epoch, "loss": w_total / max(steps, 1), "arch_loss": a_total / max(steps, 1),
                         "lr": lr}
                if phase.evaluate is not None:
                    event.update(phase.evaluate())
                if phase.describe is not None:
                    event.update(phase.describe())
                last = {k: v for k, v in event.items() if isinstance(v, (int, float))}
                self.run.log({"phase": phase.tag, **event})
                bar.advance(1, loss=event["loss"], **({"val": event["val"]} if "val" in event else {}))
                done = epoch == phase.epochs
                if done or epoch % o.checkpoint_every == 0:
                    if dist is not None:
                        dist.assert_same([p.detach().float().cpu().numpy().tobytes() for p in phase.alpha],
                                         f"{phase.tag} architecture weights")
                    seconds = time.time() - t0
                    summary = {**last, "seconds": seconds}
                    state = {"done": done, "model": module.state_dict(), "alpha": [p.detach() for p in phase.alpha],
                             "rng": rng_state(), "seconds": seconds, "summary": summary}
                    if not done:
                        state.update(w_opt=w_opt.state_dict(), a_opt=a_opt.state_dict(),
                                     scheduler=sched.state_dict(), gen_a=gen_a.get_state(), gen_b=gen_b.get_state())
                    self.run.save_checkpoint(phase.tag, epoch, state)
        phase.summary = {**last, "seconds": time.time() - t0}
        return phase.summary

    # ------------------------------------------------------------------ the search

    def search(self) -> SearchResult | None:
        model = self.build_relaxed()
        self.init_alpha(model)
        metrics = dict(self.pretext(model) or {})
        summary = self.run_phase(self.classification_phase(model))
        dist = distributed.current()
        if dist is not None and not dist.is_main:
            return None  # the bilevel training was data-parallel; rank 0 derives and retrains alone
        arch = self.space.derive(model)
        arch = dataclasses.replace(arch, meta={**arch.meta, "strategy": self.name})
        metric = self.task.metric
        seconds = summary["seconds"] + metrics.pop("pretext_seconds", 0.0)
        metrics.update({"search_epochs": self.options.epochs, "search_seconds": round(seconds, 2)})
        if "val" in summary:
            metrics[f"relaxed_val_{metric}"] = summary["val"]
        return SearchResult(arch, metrics)


def load_alpha(run_dir: str | Path, tag: str, shapes: list[tuple[int, ...]] | None = None) -> list[torch.Tensor]:
    """The architecture weights saved under checkpoint ``tag`` of the run ``run_dir``.

    Args:
        run_dir: A run directory (finished or not) of a differentiable search.
        tag: The checkpoint tag (``darts``, or a pretext phase's).
        shapes: The shapes this search's ``alpha`` has (checked; ``None``: not checked).

    Raises:
        RunDirError: When ``run_dir`` is not a run directory.
        CheckpointError: When it has no such checkpoint, or its ``alpha`` does not fit.
    """
    run = RunDir.open(run_dir)
    ck = run.load_checkpoint(tag)
    if ck is None:
        raise CheckpointError(f"strategy.alpha_from: {run.path} has no '{tag}' checkpoint to take alpha from "
                              f"(set strategy.alpha_from_tag?)")
    alpha = ck["state"].get("alpha")
    if alpha is None:
        raise CheckpointError(f"strategy.alpha_from: checkpoint '{tag}' of {run.path} holds no alpha")
    got = [tuple(a.shape) for a in alpha]
    if shapes is not None and got != [tuple(s) for s in shapes]:
        raise CheckpointError(f"strategy.alpha_from: alpha of {run.path} has shapes {got}, this search's has "
                              f"{[tuple(s) for s in shapes]} (a different space or operation pool?)")
    return [a.float() for a in alpha]


