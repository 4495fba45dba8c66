"""The base of tasks whose scores are stored measurements: no network is trained on them.

Tables of architectures with measured performance (the ENAS table of D-VAE and Chatzianastasis et al., 2021,
NAS-Bench-Graph) have no training batches, loss or model evaluation; :class:`MeasuredScoresTask`
refuses each with one line that says what the task holds and which strategies use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch

from attnas.core.errors import UnsupportedError
from attnas.tasks.base import Task


class MeasuredScoresTask(Task):
    """A task of measured scores: :meth:`batches`, :meth:`loss` and :meth:`evaluate` refuse."""

    #: What the task holds, for the refusal (``holds measured scores of architectures``).
    holds: ClassVar[str] = "holds measured scores of architectures"
    #: What to do instead, for the refusal.
    instead: ClassVar[str] = ""

    def _refuse(self, what: str) -> UnsupportedError:
        return UnsupportedError(f"task '{self.name}' {self.holds}; it has no {what} ({self.instead})")

    def batches(self, split: str, **kwargs: Any):
        raise self._refuse("training batches")

    def loss(self, output: torch.Tensor, batch: Any) -> torch.Tensor:
        raise self._refuse("loss")

    def evaluate(self, forward: Callable[[Any], torch.Tensor], split: str, batch_size: int | None = None) -> float:
        raise self._refuse("model evaluation")
