"""compare.md's header names what the task reads: a named dataset, else a generated task's settings."""

from __future__ import annotations

from attnas.comparison.report import _task_data


def test_a_named_dataset_is_named():
    assert _task_data({"name": "node-classification", "dataset": "cora", "split": "public"}) == "on `cora`"


def test_a_generated_task_without_a_dataset_shows_its_settings_not_an_empty_name():
    text = _task_data({"name": "csbm", "phi": -0.5, "graph_seed": 0, "split": "per-seed", "nested": {"a": 1}})
    assert text == "with phi=-0.5, graph_seed=0, split=per-seed"
