"""The bilevel phase of the differentiable searches: alternating weight and architecture steps.

A :class:`BilevelPhase` names what one phase trains (weights and ``alpha``, the loss, the
two splits of :func:`bilevel_splits`, the epochs); :func:`run_phase` runs it, resumes it from
its checkpoint, or skips it when it is finished. The protocol itself (first-order DARTS on
train_A / train_B) is described in :mod:`attnas.strategies.darts`.

**Events and checkpoints.** After every epoch the phase logs ``{"phase": "darts", "epoch",
"loss" (train_A), "arch_loss" (train_B), "val" (relaxed network), "arch" (the architecture
derived now), "alpha" (``softmax(alpha)``, when it has at most 400 entries)}`` and, every
``checkpoint_every`` epochs, checkpoints the weights, ``alpha``, both optimisers, the
schedule, the two batch-order generators and every RNG, so a killed search resumes exactly.

**Data-parallel (``torchrun``, :mod:`attnas.scale.distributed`).** Every rank builds the same
relaxed network (rank 0's weights and ``alpha`` are broadcast), draws the same batch order of
both splits, takes its share of each group of ``world_size`` batches
(:meth:`~attnas.scale.distributed.DistContext.shard`), and averages the weight gradients before
clipping and the architecture gradients before the Adam step, so a step on ``W`` ranks is
a step of one process on the union of their batches (tested with gloo in
``tests/scale/test_distributed.py``). Ranks check at every checkpoint that they hold the same
``alpha``; rank 0 alone writes, derives the architecture and retrains it. Batch-norm
statistics are those of each rank's part (as with ``DistributedDataParallel`` without
``SyncBatchNorm``, which PyTorch supports on GPUs only).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn

from attnas.core.errors import CheckpointError, UnsupportedError, check_finite_loss
from attnas.reporting.progress import progress
from attnas.runs.resumable_phase import ResumablePhase
from attnas.runs.run_dir import RunDir
from attnas.scale import distributed
from attnas.strategies.darts_config import DartsConfig


def bilevel_splits(task: Any, override: tuple[str, ...] | None = None) -> tuple[str, str]:
    """The ``(weight split, architecture split)`` of ``task`` (the protocol of :mod:`attnas.strategies.darts`).

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


@dataclass
class BilevelPhase:
    """One alternating weight / architecture optimisation, as :func:`run_phase` runs it.

    Attributes:
        tag: Checkpoint tag and event ``phase``.
        module: The module whose ``state_dict`` is checkpointed (holds weights and ``alpha``).
        weights: Parameters of the weight step.
        alpha: Parameters of the architecture step.
        loss: ``batch -> scalar loss`` (the weight step's, and the architecture step's
            unless ``arch_loss`` is given).
        splits: ``(weight split, architecture split)`` of the task.
        epochs: Passes over the weight split.
        arch_lr: Adam learning rate of ``alpha`` in this phase.
        evaluate: Extra per-epoch event fields (e.g. ``{"val": accuracy}``), or ``None``.
        describe: More per-epoch event fields (e.g. ``{"arch": choices}``), or ``None``.
        arch_loss: ``batch -> scalar loss`` of the architecture step (``None``: ``loss``),
            e.g. the loss plus an expected-cost term.
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
    arch_loss: Optional[Callable[[Any], torch.Tensor]] = None
    summary: dict = field(default_factory=dict)


def run_phase(phase: BilevelPhase, options: DartsConfig, run: RunDir, seed: int,
              batches: Callable[[str, torch.Generator], Iterable[Any]]) -> dict:
    """Run (or resume, or skip when finished) one bilevel phase; returns its summary.

    Args:
        phase: The phase (its tag names its checkpoint and its events).
        options: The optimisers' settings, the gradient clipping and ``checkpoint_every``.
        run: The run directory (events, checkpoints).
        seed: The search's seed (with the tag, it seeds the two batch orders).
        batches: ``(split, generator) -> batches`` of the split in the generator's order.

    Returns:
        The last epoch's event fields (``loss``, ``arch_loss``, ``val``...) and ``seconds``
        (wall time of the phase, summed over resumes).
    """
    o, w = options, options.optim  # w: the weight optimiser (SGD, cosine-annealed)
    saved = ResumablePhase(run, phase.tag, {"model": phase.module}, elapsed_key="seconds", when_done=("model",))
    if saved.load() and saved.done:
        saved.restore()
        phase.summary = dict(saved.data["summary"])
        return phase.summary
    # foreach: the same arithmetic as the per-parameter loop in a few multi-tensor kernels (a
    # supernet has hundreds of small parameters; PyTorch uses the loop by default on the CPU)
    w_opt = torch.optim.SGD(phase.weights, lr=w.lr, momentum=w.momentum, weight_decay=w.weight_decay,
                            foreach=True)
    a_opt = torch.optim.Adam(phase.alpha, lr=phase.arch_lr, betas=tuple(o.arch_betas),
                             weight_decay=o.arch_weight_decay, foreach=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(w_opt, T_max=max(1, phase.epochs), eta_min=w.lr_min)
    base = zlib.crc32(phase.tag.encode()) + 7919 * seed
    gen_a, gen_b = torch.Generator().manual_seed(base), torch.Generator().manual_seed(base + 1)
    saved.track(w_opt=w_opt, a_opt=a_opt, scheduler=sched, gen_a=gen_a, gen_b=gen_b)
    saved.restore()
    last = dict(saved.data.get("summary", {}))
    split_a, split_b = phase.splits
    module = phase.module
    dist = distributed.current()  # data-parallel (torchrun): each rank takes its share of both streams
    if dist is not None:
        dist.broadcast_module(module)  # every rank starts from rank 0's weights and alpha

    def stream(split: str, gen: torch.Generator) -> Iterator[tuple[Any, float]]:
        order = batches(split, gen)  # the same order on every rank (same generator state)
        return dist.shard(order) if dist is not None else ((b, 1.0) for b in order)

    def step(batch: Any, share: float, params: list, loss_fn: Callable[[Any], torch.Tensor]) -> float:
        """Back-propagate ``loss_fn(batch)`` into ``params`` (averaged over ranks); its value."""
        loss = loss_fn(batch)
        where = f"epoch {epoch}, step {steps + 1}"  # of the loop below
        if dist is not None:  # raises on every rank when the union's loss is not finite
            loss, value = dist.step_loss(loss, share, phase.tag, where, "lower strategy.optim.lr?")
        else:
            value = check_finite_loss(loss, phase.tag, where, "lower strategy.optim.lr?")
        loss.backward(inputs=params)
        if dist is not None:
            dist.average_gradients(params)
        return value

    module.train()
    with progress(f"{phase.tag} search", phase.epochs, completed=saved.step) as bar:
        for epoch in saved.steps(phase.epochs):
            w_total = a_total = 0.0
            steps = 0
            b_iter = stream(split_b, gen_b)
            for batch_a, share_a in stream(split_a, gen_a):
                # weight step on train_A
                w_opt.zero_grad(set_to_none=True)
                w_total += step(batch_a, share_a, phase.weights, phase.loss)
                if w.grad_clip > 0:
                    nn.utils.clip_grad_norm_(phase.weights, w.grad_clip)
                w_opt.step()
                # architecture step on train_B (restart its pass when it runs out first)
                part_b = next(b_iter, None)
                if part_b is None:
                    b_iter = stream(split_b, gen_b)
                    part_b = next(b_iter)
                a_opt.zero_grad(set_to_none=True)
                a_total += step(*part_b, phase.alpha, phase.arch_loss or phase.loss)
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
            run.log({"phase": phase.tag, **event})
            bar.advance(1, loss=event["loss"], **({"val": event["val"]} if "val" in event else {}))
            done = epoch == phase.epochs
            if done or epoch % o.checkpoint_every == 0:
                if dist is not None:
                    dist.assert_same([p.detach().float().cpu().numpy().tobytes() for p in phase.alpha],
                                     f"{phase.tag} architecture weights")
                saved.save(epoch, done=done, alpha=[p.detach() for p in phase.alpha],
                           summary={**last, "seconds": saved.elapsed})
    phase.summary = {**last, "seconds": saved.elapsed}
    return phase.summary


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
