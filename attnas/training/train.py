"""Training a model on a task: optimiser, schedule, early stopping, resumable state.

:func:`fit` trains ``model`` (``forward(batch)``) on the task's training split, evaluates
on the validation split every ``eval_every`` epochs, keeps the weights of the best
validation score, and reports the test score of those weights. Its whole state
(weights, optimiser, schedule, best weights, RNG) is checkpointed in a
:class:`~attnas.runs.resumable_phase.ResumablePhase` and restored from it to continue exactly
where it stopped.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from attnas.config import TrainConfig
from attnas.core.errors import check_finite_loss
from attnas.reporting.progress import progress
from attnas.runs.resumable_phase import ResumablePhase


def make_optimizer(params, cfg: Any) -> torch.optim.Optimizer:
    """The optimiser ``cfg`` names (``adam``, ``adamw`` or ``sgd``) over ``params``."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def make_scheduler(opt: torch.optim.Optimizer, cfg: Any, epochs: int):
    """Cosine annealing to ``cfg.lr_min`` over ``epochs`` when ``cfg.scheduler == 'cosine'``."""
    if getattr(cfg, "scheduler", "none") == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, epochs), eta_min=cfg.lr_min)
    return None


def train_epoch(model_forward: Callable, task: Any, opt: torch.optim.Optimizer, params: list, cfg: Any,
                generator: torch.Generator, dist: Any = None, phase: str = "training",
                epoch: int | None = None) -> float:
    """One pass over the training split; returns the mean loss.

    Args:
        dist: A :class:`~attnas.scale.distributed.DistContext` to train data-parallel: this rank
            takes its share of each step's batches and gradients are averaged over ranks
            before clipping and the optimiser step (every rank returns the same mean loss).
        phase: Named, with ``epoch`` and the batch, when the loss is NaN or infinite.
        epoch: The epoch this pass is (1-based), for that message.

    Raises:
        TrainingError: When a batch's loss is NaN or infinite (before any update from it).
    """
    if dist is not None:
        return _train_epoch_distributed(model_forward, task, opt, params, cfg, generator, dist, phase, epoch)
    total, count = 0.0, 0
    # a supernet step uses a few hundred of its parameter tensors: clip, step and clear only
    # those that have a gradient (bit for bit the same update), when the optimiser holds
    # exactly ``params`` in one group; otherwise the plain loop
    group = opt.param_groups[0]["params"] if len(opt.param_groups) == 1 else None
    sparse = group is not None and len(group) == len(params) and all(a is b for a, b in zip(group, params))
    opt.zero_grad(set_to_none=True)
    batches = task.batches("train", shuffle=True, generator=generator, batch_size=cfg.batch_size)
    for number, batch in enumerate(batches, 1):
        if not sparse:
            opt.zero_grad(set_to_none=True)
        loss = task.loss(model_forward(batch), batch)
        value = check_finite_loss(loss, phase, f"epoch {epoch}, batch {number}" if epoch else f"batch {number}")
        loss.backward()
        active = [p for p in params if p.grad is not None] if sparse else params
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(active, cfg.grad_clip)
        if sparse:
            step_with_gradients(opt, active)
            for p in active:  # the other parameters have no gradient (set_to_none)
                p.grad = None
        else:
            opt.step()
        total += value
        count += 1
    return total / max(count, 1)


def step_with_gradients(opt: torch.optim.Optimizer, active: list) -> None:
    """``opt.step()``, walking only the parameters ``active`` that have a gradient.

    The update is the same bit for bit: torch's optimisers skip parameters without a
    gradient, but they walk all of them in Python, which in a supernet (tens of
    thousands of parameter tensors, a few hundred used per step) costs more than the
    update itself. With one parameter group its list is swapped for ``active`` (which
    must keep the group's order) during the step; otherwise ``opt.step()`` runs as usual.
    """
    if len(opt.param_groups) != 1:
        opt.step()
        return
    group = opt.param_groups[0]
    everything = group["params"]
    group["params"] = active
    try:
        opt.step()
    finally:
        group["params"] = everything


def _train_epoch_distributed(model_forward: Callable, task: Any, opt: torch.optim.Optimizer, params: list,
                             cfg: Any, generator: torch.Generator, dist: Any, phase: str,
                             epoch: int | None) -> float:
    total, count = 0.0, 0
    batches = task.batches("train", shuffle=True, generator=generator, batch_size=cfg.batch_size)
    for number, (batch, share) in enumerate(dist.shard(batches), 1):
        opt.zero_grad(set_to_none=True)
        where = f"epoch {epoch}, step {number}" if epoch else f"step {number}"
        loss, union_loss = dist.step_loss(task.loss(model_forward(batch), batch), share, phase, where)
        loss.backward()
        dist.average_gradients(params)
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        total += union_loss
        count += 1
    return total / max(count, 1)


@dataclass
class FitResult:
    """Outcome of :func:`fit`.

    Attributes:
        val: Best validation score.
        test: Test score of the best-validation weights.
        best_epoch: Epoch (1-based) of the best validation score.
        epochs: Epochs run.
        state_dict: The best-validation weights (loaded into the model on return).
        history: ``[{"epoch", "loss", "val"}]`` per evaluated epoch.
    """

    val: float
    test: float
    best_epoch: int
    epochs: int
    state_dict: dict
    history: list = field(default_factory=list)


def fit(model: nn.Module, task: Any, cfg: TrainConfig, *, seed: int = 0, desc: str = "train",
        log: Callable[[dict], None] | None = None, phase: ResumablePhase | None = None,
        checkpoint_every: int = 0, score_test: bool = True) -> FitResult:
    """Train ``model`` on ``task`` with early stopping on the validation score.

    Args:
        model: A module with ``forward(batch)``.
        task: The task (its batches, loss and metric).
        cfg: Optimiser, epochs, patience, etc.
        seed: Seed of the batch order.
        desc: Label of the progress bar; names the phase when the loss becomes NaN or infinite.
        log: Called with one event dict per evaluated epoch.
        phase: Where the training state is checkpointed (``model``, ``optimizer``,
            ``scheduler``, ``generator``, the RNGs, and ``epoch``, ``best_val``,
            ``best_epoch``, ``best_state``, ``history``); when it has loaded a checkpoint
            (:meth:`~attnas.runs.resumable_phase.ResumablePhase.load`) training continues from it.
            ``None``: not checkpointed.
        checkpoint_every: Epochs between checkpoints (0: never).
        score_test: Whether to score the test split at the end; a search's candidates are
            not (their ``test`` is NaN), so nothing a search chooses among has a test score.

    Returns:
        A :class:`FitResult`; the model holds the best-validation weights.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params, cfg)
    sched = make_scheduler(opt, cfg, cfg.epochs)
    gen = torch.Generator().manual_seed(seed)
    phase = phase if phase is not None else ResumablePhase(None, desc)
    phase.track(model=model, optimizer=opt, scheduler=sched, generator=gen)
    best_val, best_epoch, best_state, history = -math.inf, 0, None, []
    if phase.loaded:
        phase.restore()
        st = phase.data
        phase.step, best_val, best_epoch = st["epoch"], st["best_val"], st["best_epoch"]
        best_state, history = st["best_state"], list(st["history"])

    def evaluate(split: str) -> float:
        model.eval()
        try:
            return task.evaluate(model, split, batch_size=cfg.batch_size)
        finally:
            model.train()

    model.train()
    with progress(desc, cfg.epochs, completed=phase.step) as bar:
        for epoch in phase.steps(cfg.epochs):
            loss = train_epoch(model, task, opt, params, cfg, gen, phase=desc, epoch=epoch)
            if sched is not None:
                sched.step()
            if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
                val = evaluate("val")
                history.append({"epoch": epoch, "loss": loss, "val": val})
                if log is not None:
                    log({"epoch": epoch, "loss": loss, "val": val})
                if val > best_val:
                    best_val, best_epoch = val, epoch
                    best_state = copy.deepcopy(model.state_dict())
            bar.advance(1, loss=loss, best_val=best_val)
            if cfg.patience and epoch - best_epoch >= cfg.patience:
                break
            if checkpoint_every and epoch % checkpoint_every == 0:
                phase.save(epoch, epoch=epoch, best_val=best_val, best_epoch=best_epoch, best_state=best_state,
                           history=history)
    if best_state is not None:
        model.load_state_dict(best_state)
    test = evaluate("test") if score_test else math.nan
    return FitResult(val=best_val, test=test, best_epoch=best_epoch, epochs=phase.step,
                     state_dict=best_state or model.state_dict(), history=history)
