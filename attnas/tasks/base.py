"""The Task role: data plus what "good" means.

A task owns its data (loaded from the data root), the shapes a model needs
(:class:`TaskInfo`), how batches are formed, the loss, and the metric. Models take one
batch and return the task's output (``model(batch)``; supernets ``model(batch, arch)``),
so strategies and the trainer never look inside a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class TaskInfo:
    """What a model needs to know about a task's data.

    Attributes:
        kind: ``node``, ``text``, ``image``, ``sequence`` or ``reconstruction``.
        in_dim: Input feature size (node features, embedding size, channels).
        num_classes: Output size.
        multilabel: Whether targets are multi-label (sigmoid outputs).
        extra: Task-specific facts (e.g. ``{"inductive": True}``, vocabulary size).
    """

    kind: str
    in_dim: int
    num_classes: int
    multilabel: bool = False
    extra: dict = field(default_factory=dict)


class Task:
    """Base class of tasks.

    Args:
        options: The task's validated ``Config`` dataclass instance.
        data_root: Where datasets are read from (see :mod:`attnas.data.root`).
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type | None] = None
    metric: ClassVar[str] = "accuracy"

    def __init__(self, options: Any = None, data_root: Path | None = None):
        self.options = options if options is not None else (self.Config() if self.Config else None)
        self.data_root = data_root
        self.device = torch.device("cpu")

    @property
    def info(self) -> TaskInfo:
        """Shapes and facts a model needs."""
        raise NotImplementedError

    def to(self, device: torch.device | str) -> Task:
        """Move the task's tensors to ``device`` (batches come out there)."""
        self.device = torch.device(device)
        return self

    def batches(self, split: str, *, shuffle: bool = False, generator: torch.Generator | None = None,
                batch_size: int | None = None) -> Iterator[Any]:
        """Iterate over the batches of ``split``.

        Args:
            split: ``train``, ``val`` or ``test``.
            shuffle: Visit the examples in a random order (drawn on the CPU from ``generator``).
            generator: Torch generator for the order (default: the global one).
            batch_size: Examples per batch (default: the task's ``batch_size``).
        """
        raise NotImplementedError

    def loss(self, output: torch.Tensor, batch: Any) -> torch.Tensor:
        """Training loss of ``output`` on ``batch``."""
        raise NotImplementedError

    @torch.no_grad()
    def evaluate(self, forward: Callable[[Any], torch.Tensor], split: str, batch_size: int | None = None) -> float:
        """The task's metric (a fraction in [0, 1]) of ``forward`` on ``split``."""
        raise NotImplementedError

    def select_split(self, index: int, retraining: bool = False) -> None:
        """Train and evaluate on repetition ``index`` of the data's splits from now on.

        Called with the recipe's ``seed`` when a task is built for a run, and with ``k`` and
        ``retraining=True`` before retraining seed ``k``. Tasks with several fixed splits (the
        ten of the heterophilous graphs, :mod:`attnas.tasks.heterophilous`) may use split
        ``index mod S``; the others have one split and ignore it.
        """

    def with_dataset(self, dataset: str) -> Task:
        """The same task on another dataset (for transfer: ``attnas retrain --dataset``)."""
        raise NotImplementedError(f"task '{self.name}' cannot switch datasets")


def argmax_counts(output: torch.Tensor, y: torch.Tensor) -> tuple[int, int]:
    """``(correct, examples)`` of one batch: argmax hits of the logits ``output [..., C]`` against ``y``."""
    return int((output.argmax(dim=-1) == y).sum()), int(y.numel())


class SplitTensorsTask(Task):
    """A task whose data are tensors held per split (``self._tensors[split]``, a tuple) and
    whose metric is an accuracy counted batch by batch (:meth:`count_correct`)."""

    _tensors: dict[str, tuple[torch.Tensor, ...]]

    def to(self, device: torch.device | str) -> SplitTensorsTask:
        super().to(device)
        self._tensors = {s: tuple(t.to(self.device) for t in ts) for s, ts in self._tensors.items()}
        return self

    @staticmethod
    def count_correct(output: torch.Tensor, batch: dict[str, torch.Tensor]) -> tuple[int, int]:
        """``(correct, counted)`` of one batch (the accuracy's numerator and denominator):
        here one prediction per example, :func:`argmax_counts`."""
        return argmax_counts(output, batch["y"])

    @torch.no_grad()
    def evaluate(self, forward: Callable[[Any], torch.Tensor], split: str, batch_size: int | None = None) -> float:
        """Accuracy of ``forward`` on ``split``: the hits of :meth:`count_correct` over all batches."""
        correct = total = 0
        for batch in self.batches(split, batch_size=batch_size):
            c, t = self.count_correct(forward(batch), batch)
            correct, total = correct + c, total + t
        return correct / max(total, 1)
