"""The AutoAttend graph recipes of Table 6: the baseline space differs from the recipe only in its layer types."""

from __future__ import annotations

import dataclasses
import random

import pytest

from attnas.config import load_config
from attnas.runs.build import build_space


@pytest.mark.parametrize("dataset", ["cora", "citeseer"])
def test_the_baseline_space_recipe_is_the_recipe_without_attention_layers(dataset):
    full, baseline = load_config(f"autoattend-{dataset}"), load_config(f"autoattend-{dataset}-baseline-space")
    assert baseline.space.options.layer_types == ("add",) and "attn" in full.space.options.layer_types
    same_space = dataclasses.replace(baseline.space.options, layer_types=full.space.options.layer_types)
    assert same_space == full.space.options
    assert (baseline.task, baseline.strategy, baseline.retrain) == (full.task, full.strategy, full.retrain)


def test_the_baseline_space_samples_addition_layers_only():
    space = build_space(load_config("autoattend-cora-baseline-space"))
    rng = random.Random(0)
    types = {layer["type"] for _ in range(50) for layer in space.sample(rng).choices["layers"]}
    assert types == {"add"}
