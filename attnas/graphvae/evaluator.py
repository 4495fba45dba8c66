"""Evaluators: what scores an architecture decoded during latent-space optimisation.

Chatzianastasis et al., 2021, Sec. 4.3 (after D-VAE, Sec. 4.3): decoded architectures are evaluated by their
weight-sharing accuracy. Here an :class:`Evaluator` maps decoded DAGs to
:class:`Evaluation` records, each saying where its value came from (``source``), so no
output can pass off a prediction as a measurement:

- :class:`TableEvaluator` answers from a table of measured values (the ENAS dataset's
  weight-sharing accuracies, ``source="dataset"``) for the architectures it holds; the
  others are handed to a fallback evaluator when one is given, and otherwise answered
  ``source="unscored"`` with no value (``nan``): an architecture outside the table has no
  measurement, and latent BO counts and reports it as unscored;
- :class:`SurrogateEvaluator` predicts with a sparse GP on the VAE's latent means
  (``source="surrogate"``): a model's guess, never a measurement. Latent BO on a table no
  longer uses it (a GP fitted on the same latents as the BO's own GP would let the search
  optimise its own surrogate); it remains for explicit use;
- :class:`CallableEvaluator` wraps any function of the DAGs (e.g. a supernet's
  validation accuracy in another space) under a source name of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from attnas.core.errors import ConfigError, DataError
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.gp import SparseGP
from attnas.graphvae.vae import GraphVAE

DATASET = "dataset"
SURROGATE = "surrogate"
UNSCORED = "unscored"


@dataclass(frozen=True)
class Evaluation:
    """The score of one architecture.

    Attributes:
        value: The score (e.g. an accuracy fraction); ``nan`` when unscored.
        source: Where it comes from: ``"dataset"`` (a stored measurement),
            ``"surrogate"`` (a model's prediction), ``"unscored"`` (no score: not in the
            table and no fallback) or another evaluator's name.
    """

    value: float
    source: str


class Evaluator(Protocol):
    """Scores decoded DAGs (one :class:`Evaluation` per graph, in order)."""

    def evaluate(self, graphs: DagBatch) -> list[Evaluation]: ...


class SurrogateEvaluator:
    """Predicts scores with a sparse GP on the VAE's latent means (``source="surrogate"``).

    Args:
        model: The VAE whose encoder maps a DAG to its latent mean.
        gp: A GP fitted on latent means and scores.
    """

    def __init__(self, model: GraphVAE, gp: SparseGP):
        self.model = model
        self.gp = gp

    def evaluate(self, graphs: DagBatch) -> list[Evaluation]:
        if len(graphs) == 0:
            return []
        z = self.model.latent_means(graphs)
        mean, _ = self.gp.predict(z)
        return [Evaluation(float(v), SURROGATE) for v in mean.tolist()]


class TableEvaluator:
    """Answers from measured values where it has them, else from ``fallback`` or unscored.

    Args:
        table: :meth:`DagBatch.keys` key to measured value.
        fallback: Evaluator for graphs not in the table; None (default) answers them
            ``Evaluation(nan, "unscored")``.
        source: The source name of table answers.
    """

    def __init__(self, table: dict[str, float], fallback: Evaluator | None = None, source: str = DATASET):
        if not table:
            raise DataError("a table evaluator needs at least one measured architecture")
        self.table = table
        self.fallback = fallback
        self.source = source

    @staticmethod
    def from_dataset(data: DagDataset, fallback: Evaluator | None = None) -> TableEvaluator:
        """Table of a dataset's values; an architecture listed twice gets its mean value.

        Raises:
            DataError: When the dataset has no values.
        """
        if data.y is None:
            raise DataError("the dataset has no values to answer from")
        sums: dict[str, list[float]] = {}
        for key, val in zip(data.graphs.keys(), data.y.tolist()):
            sums.setdefault(key, []).append(val)
        return TableEvaluator({k: sum(v) / len(v) for k, v in sums.items()}, fallback)

    def evaluate(self, graphs: DagBatch) -> list[Evaluation]:
        keys = graphs.keys()
        out: list[Evaluation | None] = [
            Evaluation(self.table[k], self.source) if k in self.table else None for k in keys
        ]
        missing = [i for i, e in enumerate(out) if e is None]
        if missing and self.fallback is None:
            for i in missing:
                out[i] = Evaluation(float("nan"), UNSCORED)
        elif missing:
            answers = self.fallback.evaluate(graphs.index(torch.tensor(missing)))
            for i, e in zip(missing, answers):
                out[i] = e
        return out  # type: ignore[return-value]

    def contains(self, graphs: DagBatch) -> torch.Tensor:
        """Whether the table holds each graph (``(G,)`` bool), e.g. to decode only into it."""
        return torch.tensor([k in self.table for k in graphs.keys()], dtype=torch.bool)


class CallableEvaluator:
    """Scores graphs with ``fn`` (a list of values, one per graph) under ``source``.

    Args:
        fn: Maps a batch of DAGs to their scores.
        source: Name recorded with every answer (e.g. ``"supernet"``).
    """

    def __init__(self, fn: Callable[[DagBatch], Sequence[float]], source: str):
        if not source:
            raise ConfigError("an evaluator needs a non-empty source name")
        self.fn = fn
        self.source = source

    def evaluate(self, graphs: DagBatch) -> list[Evaluation]:
        values = list(self.fn(graphs))
        if len(values) != len(graphs):
            raise DataError(f"evaluator '{self.source}' returned {len(values)} scores for {len(graphs)} graphs")
        return [Evaluation(float(v), self.source) for v in values]
