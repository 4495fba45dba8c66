"""``darts``: first-order differentiable architecture search (DARTS; AutoLA Sec. 3.3, 4.2).

The space's continuous relaxation (:meth:`~attnas.spaces.base.Space.relaxed`: a network whose
``arch_parameters()`` -- the architecture weights ``alpha`` -- are kept apart from its
``weight_parameters()``) is trained by alternating two steps on two disjoint halves of the
training data (AutoLA Eq. 15 with the first-order approximation of Liu et al., 2019):

* a weight step on a batch of ``train_A``: SGD (``strategy.optim``: momentum 0.9, weight decay
  3e-4, cosine learning rate 0.025 -> 0.001 over the epochs, gradient norm clipped at 5);
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

**Events and checkpoints, data-parallel runs.** The phase loop, its events and checkpoints
(a killed search resumes exactly) and its data-parallel form are those of
:mod:`attnas.strategies.bilevel`; the options are :class:`DartsConfig`
(:mod:`attnas.strategies.darts_config`).

**Cost-aware search.** ``strategy.cost: {name: params, weight: 0.5}`` (off by default) adds
``weight * (E[cost] - min) / (max - min)`` to the architecture step's loss: the network's
parameters (or MACs) expected under ``softmax(alpha)`` (scaled to [0, 1] between the cheapest
and the costliest architecture), from per-operation costs measured once on the
space's standalone networks (:mod:`attnas.strategies.darts_cost`), so a larger weight
derives cheaper operations. The epoch events carry ``expected_<name>`` and the metrics the
final ``alpha``'s.

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
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from attnas.core.errors import ConfigError, DataError, RunDirError, UnsupportedError
from attnas.registry import register_strategy
from attnas.runs.rng import first_batch
from attnas.runs.rng import rng_state, seed_everything, set_rng_state
from attnas.scale import distributed
from attnas.strategies.base import SearchResult, Strategy
from attnas.strategies.bilevel import BilevelPhase, bilevel_splits, load_alpha, run_phase
from attnas.strategies.darts_config import DartsConfig
from attnas.strategies.darts_cost import ExpectedCost, single_alpha

__all__ = ["ALPHA_EVENT_LIMIT", "BilevelPhase", "Darts", "DartsConfig", "bilevel_splits", "load_alpha"]

ALPHA_EVENT_LIMIT = 400  # log softmax(alpha) in the epoch events when it has at most this many entries


def _check_parameters(model: nn.Module, space_name: str) -> None:
    alpha = list(model.arch_parameters())
    ids = {id(p) for p in alpha}
    if not alpha or any(id(p) in ids for p in model.weight_parameters()):
        raise UnsupportedError(f"space '{space_name}': its relaxed network must expose disjoint, "
                               f"non-empty arch_parameters() and weight_parameters()")


@register_strategy("darts")
class Darts(Strategy):
    """First-order DARTS: weights on train_A, architecture weights on train_B (AutoLA Sec. 3.3)."""

    name = "darts"
    Config = DartsConfig
    requires = ("relaxed",)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.elapsed = 0.0
        self.cost_term: ExpectedCost | None = None

    @classmethod
    def search_epochs(cls, options: DartsConfig) -> int:
        """``epochs``: each is one pass over train_A (weights) and train_B (``alpha``)."""
        return options.epochs

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
        if options.cost.weight > 0:
            space.alpha_arch([0] * single_alpha(model, space.name).shape[0])  # the space can name them
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

    def expected_cost(self, model: nn.Module) -> ExpectedCost | None:
        """The expected-cost term of ``strategy.cost`` (``None`` when its weight is 0); the
        per-operation costs are measured on first use, cached in the run directory."""
        o = self.options.cost
        if o.weight <= 0:
            return None
        if self.cost_term is None:
            dist = distributed.current()
            run = self.run if dist is None or dist.is_main else None  # rank 0 alone writes costs.jsonl
            self.cost_term = ExpectedCost(self.space, self.task, model, o.name, o.batch_size, run)
        return self.cost_term

    def classification_phase(self, model: nn.Module) -> BilevelPhase:
        """The main phase: the task's loss (plus the expected-cost term in the architecture
        step, with ``strategy.cost``), ``val`` scored and the architecture derived per epoch."""
        o, task = self.options, self.task
        cost = self.expected_cost(model)
        alpha = single_alpha(model, self.space.name) if cost is not None else None

        def cost_aware_loss(batch: Any) -> torch.Tensor:
            return task.loss(model(batch), batch) + o.cost.weight * cost.fraction(alpha)

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
            if cost is not None:
                with torch.no_grad():
                    out[f"expected_{cost.name}"] = round(float(cost.expected(alpha[0])), 2)
            return out

        return BilevelPhase(tag="darts", module=model, weights=list(model.weight_parameters()),
                            alpha=list(model.arch_parameters()), loss=lambda batch: task.loss(model(batch), batch),
                            splits=bilevel_splits(task, o.splits), epochs=o.epochs, arch_lr=o.arch_lr,
                            evaluate=evaluate, describe=describe,
                            arch_loss=cost_aware_loss if cost is not None else None)

    # ------------------------------------------------------------------ the loop

    def _batches(self, split: str, gen: torch.Generator) -> Iterator[Any]:
        return self.task.batches(split, shuffle=True, generator=gen, batch_size=self.options.optim.batch_size)

    def run_phase(self, phase: BilevelPhase) -> dict:
        """Run (or resume, or skip when finished) one bilevel phase of this search; returns its
        summary (:func:`~attnas.strategies.bilevel.run_phase`)."""
        return run_phase(phase, self.options, self.run, self.seed, self._batches)

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
        cost = self.expected_cost(model)
        if cost is not None:
            with torch.no_grad():
                metrics[f"expected_{cost.name}"] = round(float(cost.expected(single_alpha(model, self.space.name))), 2)
        return SearchResult(arch, metrics)
