"""Selecting attention mechanisms from a trained fixed-alpha supernet (DARTFormer, Sec. 3.1-3.3).

The strength of a candidate block ``j`` is its masked-drop score (masked validation
accuracy, Wang et al. 2021, "Rethinking Architecture Selection in Differentiable NAS",
Sec. 4):

    score_j = acc(all active blocks) - acc(all active blocks, block j's output zeroed)

measured with random features and hash rotations frozen, so every evaluation sees the
same random structure. From these scores:

* homogeneous search (Sec. 3.3.1): one multi-head block per mechanism, a single masked
  trial, the highest score wins (:func:`select_homogeneous`);
* heterogeneous search (Sec. 3.3.2), ``H`` single-head blocks per mechanism:
  **NAS One-shot** scores once and keeps the top ``H`` heads (:func:`nas_one_shot`);
  **NAS Prune** repeatedly drops the lowest-scoring head, fine-tunes for a few steps
  and rescores, until ``H`` heads remain (:func:`nas_prune`; the progressive
  discretisation of Wang et al. 2021, Alg. 1).

These are plain functions over a model with the selection interface of
:class:`~attnas.models.mechanism_supernet.MechanismSupernet` (``active_names``,
``masked(names)``, ``drop(name)``), an ``evaluate(model) -> accuracy`` callable (or a
``trial(model) -> DropScores`` callable, e.g. :func:`sweep_trial`, which scores every
block in one pass over the validation batches) and, for pruning, a
``train_step(model)`` callable; the strategy that wraps them
(:mod:`attnas.strategies.mechanism_search`) adds checkpoints. The pruned set lives in the model's ``state_dict``, so calling
:func:`nas_prune` again on a reloaded model continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn

from attnas.core.errors import ConfigError


class SelectableSupernet(Protocol):
    """What selection needs from a supernet."""

    @property
    def active_names(self) -> list[str]: ...

    def masked(self, names: list[str]) -> Any: ...

    def drop(self, name: str) -> None: ...


Evaluate = Callable[[Any], float]
TrainStep = Callable[[Any], Any]
#: ``count(output, batch) -> (correct, total)`` of one batch.
Count = Callable[[Any, Any], tuple[int, int]]


@dataclass
class DropScores:
    """One masked-validation trial.

    Attributes:
        base: Accuracy with every active block.
        scores: ``block name -> base - accuracy with that block zeroed``, in block order.
    """

    base: float
    scores: dict[str, float]

    def ranking(self) -> list[str]:
        """Block names from strongest to weakest (ties keep block order)."""
        order = list(self.scores)
        return sorted(order, key=lambda n: (-self.scores[n], order.index(n)))

    def to_dict(self) -> dict:
        """Plain data for ``metrics.json``."""
        return {"base_accuracy": self.base, "scores": dict(self.scores)}


@dataclass
class SelectionResult:
    """Outcome of a selection.

    Attributes:
        kept: Names of the blocks kept, in block order.
        dropped: Names of the dropped blocks, in the order they were dropped.
        trials: Every masked-validation trial, in order.
    """

    kept: list[str]
    dropped: list[str] = field(default_factory=list)
    trials: list[DropScores] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain data for ``metrics.json``."""
        return {"kept": list(self.kept), "dropped": list(self.dropped), "trials": [t.to_dict() for t in self.trials]}


#: ``trial(model) -> DropScores``: one masked-validation trial of the active blocks.
Trial = Callable[[Any], DropScores]


@contextmanager
def frozen_random(model: nn.Module) -> Iterator[nn.Module]:
    """Freeze every submodule's random structure (and restore each one's state afterwards)."""
    saved = [(m, m.frozen) for m in model.modules() if hasattr(m, "freeze_random") and hasattr(m, "frozen")]
    for m, _ in saved:
        m.freeze_random(True)
    try:
        yield model
    finally:
        for m, state in saved:
            m.freeze_random(state)


@contextmanager
def evaluation_mode(model: nn.Module) -> Iterator[nn.Module]:
    """``model.eval()`` and frozen random structure inside the ``with``; training mode restored after."""
    was_training = model.training
    model.eval()
    try:
        with frozen_random(model):
            yield model
    finally:
        model.train(was_training)


def masked_drop_scores(model: SelectableSupernet, evaluate: Evaluate, blocks: list[str] | None = None) -> DropScores:
    """Masked-validation scores of the active blocks.

    Args:
        model: The supernet.
        evaluate: ``evaluate(model) -> validation accuracy``.
        blocks: Which active blocks to score (default: all).

    Returns:
        The base accuracy and ``score_j = base - acc(block j zeroed)`` per block.
    """
    names = list(model.active_names if blocks is None else blocks)
    with evaluation_mode(model):  # type: ignore[arg-type]
        base = float(evaluate(model))
        scores = {}
        for name in names:
            with model.masked([name]):
                scores[name] = base - float(evaluate(model))
    return DropScores(base, scores)


def masked_sums(model: Any, batches: Callable[[], Iterable[Any]], patterns: list[list[str]],
                measure: Callable[[Any, Any], tuple[float, ...]]) -> list[list[float]]:
    """Per masking pattern, the sums over the batches of ``measure(output, batch)``.

    Batches are the outer loop and masking patterns the inner one, so a supernet with
    ``reuse_outputs()`` (:class:`~attnas.models.mechanism_supernet.MechanismSupernet`)
    runs each candidate block once per batch instead of once per pattern. Runs in
    :func:`evaluation_mode` (random structure frozen) without gradients.

    Args:
        model: The supernet (with ``reuse_outputs()`` for the saving; works without).
        batches: ``batches()`` yields the batches afresh.
        patterns: Block names to zero, one list per evaluation (``[]``: every block active).
        measure: ``measure(output, batch) -> numbers`` of one batch (e.g. ``(correct, total)``).

    Returns:
        One list of sums per pattern (empty lists when there are no batches).
    """
    sums: list[list[float]] = [[] for _ in patterns]
    reuse = model.reuse_outputs() if hasattr(model, "reuse_outputs") else nullcontext()
    with evaluation_mode(model), reuse, torch.no_grad():
        for batch in batches():
            for i, pattern in enumerate(patterns):
                with model.masked(pattern):
                    values = measure(model(batch), batch)
                sums[i] = [a + b for a, b in zip(sums[i], values)] if sums[i] else list(values)
    return sums


def masked_drop_scores_sweep(model: Any, batches: Callable[[], Iterable[Any]], count: Count,
                             blocks: list[str] | None = None) -> DropScores:
    """Masked-validation scores from one pass over the batches (same numbers as :func:`masked_drop_scores`).

    Scoring ``n`` blocks with :func:`masked_sums` costs about one supernet pass plus
    ``n + 1`` passes of the cheap layers after the attention, instead of ``n + 1``
    supernet passes.

    Args:
        model: The supernet (with ``reuse_outputs()`` for the saving; works without).
        batches: ``batches()`` yields the validation batches afresh.
        count: ``count(output, batch) -> (correct, total)``.
        blocks: Which active blocks to score (default: all).

    Returns:
        The base accuracy and ``score_j = base - acc(block j zeroed)`` per block.
    """
    names = list(model.active_names if blocks is None else blocks)
    counts = lambda output, batch: tuple(int(v) for v in count(output, batch))  # noqa: E731
    sums = masked_sums(model, batches, [[], *([n] for n in names)], counts)
    acc = [s[0] / max(s[1], 1) if s else 0.0 for s in sums]
    return DropScores(acc[0], {name: acc[0] - a for name, a in zip(names, acc[1:])})


def sweep_trial(batches: Callable[[], Iterable[Any]], count: Count) -> Trial:
    """A ``trial(model)`` callable running :func:`masked_drop_scores_sweep`."""
    return lambda model: masked_drop_scores_sweep(model, batches, count)


def _trial(evaluate: Evaluate | None, trial: Trial | None) -> Trial:
    if (evaluate is None) == (trial is None):
        raise ConfigError("selection: give exactly one of evaluate and trial")
    if trial is not None:
        return trial
    return lambda model: masked_drop_scores(model, evaluate)


def select_homogeneous(model: SelectableSupernet, evaluate: Evaluate | None = None, *,
                       trial: Trial | None = None) -> tuple[str, DropScores]:
    """Homogeneous search (Sec. 3.3.1): one masked trial; the highest-scoring block wins.

    Args:
        model: The trained supernet.
        evaluate: ``evaluate(model) -> validation accuracy`` (or give ``trial``).
        trial: ``trial(model) -> DropScores`` (e.g. :func:`sweep_trial`).

    Returns:
        ``(winning block name, the trial)``.
    """
    scores = _trial(evaluate, trial)(model)
    return scores.ranking()[0], scores


def _check_keep(model: SelectableSupernet, keep: int) -> None:
    n = len(model.active_names)
    if not 1 <= keep <= n:
        raise ConfigError(f"keep: must be between 1 and the {n} active blocks, got {keep}")


def nas_one_shot(model: SelectableSupernet, evaluate: Evaluate | None = None, keep: int = 1, *,
                 trial: Trial | None = None) -> SelectionResult:
    """NAS One-shot (Sec. 3.3.2): score once, keep the ``keep`` highest-scoring heads, drop the rest.

    Args:
        model: The trained heterogeneous supernet (modified in place).
        evaluate: ``evaluate(model) -> validation accuracy`` (or give ``trial``).
        keep: Number of heads ``H`` to keep.
        trial: ``trial(model) -> DropScores`` (e.g. :func:`sweep_trial`).
    """
    score = _trial(evaluate, trial)
    _check_keep(model, keep)
    trial = score(model)
    ranking = trial.ranking()
    dropped = ranking[keep:][::-1]  # weakest first
    for name in dropped:
        model.drop(name)
    return SelectionResult(kept=list(model.active_names), dropped=dropped, trials=[trial])


def nas_prune(model: SelectableSupernet, train_step: TrainStep, evaluate: Evaluate | None = None, keep: int = 1,
              finetune_steps: int = 10,
              on_round: Callable[[SelectionResult], None] | None = None, *,
              trial: Trial | None = None) -> SelectionResult:
    """NAS Prune (Sec. 3.3.2): drop the lowest-scoring head, fine-tune, rescore, until ``keep`` remain.

    Called on a partly pruned model (e.g. reloaded from a checkpoint) it continues from
    the blocks still active; the result then holds the rounds of this call only.

    Args:
        model: The trained heterogeneous supernet (modified in place).
        train_step: ``train_step(model)`` performs one optimisation step.
        evaluate: ``evaluate(model) -> validation accuracy`` (or give ``trial``).
        keep: Number of heads ``H`` to keep.
        finetune_steps: ``train_step`` calls after each drop (not after the last).
        on_round: Called with the result so far after every drop (for checkpoints).
        trial: ``trial(model) -> DropScores`` (e.g. :func:`sweep_trial`).
    """
    score = _trial(evaluate, trial)
    _check_keep(model, keep)
    if finetune_steps < 0:
        raise ConfigError(f"finetune_steps: must be >= 0, got {finetune_steps}")
    result = SelectionResult(kept=list(model.active_names))
    while len(model.active_names) > keep:
        trial = score(model)
        worst = trial.ranking()[-1]
        model.drop(worst)
        result.trials.append(trial)
        result.dropped.append(worst)
        result.kept = list(model.active_names)
        if len(result.kept) > keep:
            for _ in range(finetune_steps):
                train_step(model)
        if on_round is not None:
            on_round(result)
    return result
