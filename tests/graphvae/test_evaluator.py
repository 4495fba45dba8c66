"""Evaluators label every answer with its source."""

from __future__ import annotations

import pytest
import torch
from dag_factory import random_dags

from attnas.core.errors import DataError
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.evaluator import CallableEvaluator, Evaluation, TableEvaluator

VOCAB = ("input", "output", "a", "b", "c")


def test_table_answers_known_graphs_and_defers_the_rest():
    g = random_dags(4, 6, 5, seed=0)
    known = DagDataset(DagBatch.cat([g.index([0, 1, 0])]), torch.tensor([0.5, 0.6, 0.7]), VOCAB)
    fallback = CallableEvaluator(lambda b: [-1.0] * len(b), "surrogate")
    ev = TableEvaluator.from_dataset(known, fallback)
    out = ev.evaluate(g.index([1, 2, 0, 3]))
    assert [e.source for e in out] == ["dataset", "surrogate", "dataset", "surrogate"]
    assert out[0].value == pytest.approx(0.6) and out[2].value == pytest.approx(0.6)  # duplicates averaged
    assert out[1] == Evaluation(-1.0, "surrogate")


def test_table_without_fallback_leaves_unknown_graphs_unscored():
    g = random_dags(3, 6, 5, seed=0)
    ev = TableEvaluator.from_dataset(DagDataset(g.index([0]), torch.tensor([0.5]), VOCAB))
    out = ev.evaluate(g.index([0, 1, 2]))
    assert [e.source for e in out] == ["dataset", "unscored", "unscored"]
    assert out[0].value == pytest.approx(0.5)
    assert all(e.value != e.value for e in out[1:])  # nan: no number stands in for a measurement
    assert ev.contains(g.index([0, 1, 2])).tolist() == [True, False, False]


def test_callable_evaluator_checks_lengths():
    ev = CallableEvaluator(lambda b: [1.0], "supernet")
    with pytest.raises(DataError, match="returned 1 scores for 2"):
        ev.evaluate(random_dags(2, 5, 5))


def test_table_needs_values():
    with pytest.raises(DataError, match="no values"):
        TableEvaluator.from_dataset(DagDataset(random_dags(2, 5, 5), None, VOCAB), CallableEvaluator(lambda b: [], "x"))
