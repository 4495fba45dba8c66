"""The options base :class:`attnas.config.CheckedConfig` and the one walk of a value against its
type (:func:`attnas.config.coerce`): every options dataclass checks its fields as it is built,
a recipe's values are range-checked once, and the renamed options classes keep their old names.
"""

from __future__ import annotations

import dataclasses
import typing
from collections import Counter

import numpy as np
import pytest

from attnas import registry
from attnas.config import CheckedConfig, Range, RunConfig, TrainConfig, check_fields, load_config
from attnas.core.errors import ConfigError


def _options_classes() -> set[type]:
    """The options dataclasses of every registered component, those nested in them, and the run's own."""
    found: set[type] = set()
    todo = [RunConfig, *(getattr(registry.get(kind, name), "Config", None)
                         for kind in ("task", "space", "strategy") for name in registry.names(kind))]
    while todo:
        cls = todo.pop()
        if cls is None or cls in found or not dataclasses.is_dataclass(cls):
            continue
        found.add(cls)
        for tp in typing.get_type_hints(cls).values():
            todo.extend(a for a in (tp, *typing.get_args(tp)) if isinstance(a, type))
    return found


def test_every_options_dataclass_checks_its_fields_and_its_defaults_are_in_range():
    classes = _options_classes()
    assert len(classes) > 40
    assert not [c.__name__ for c in classes if not issubclass(c, CheckedConfig)]
    for cls in classes:  # a recipe's omitted keys take the defaults unchecked, so each must be valid
        defaults = object.__new__(cls)
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                object.__setattr__(defaults, f.name, f.default)
            elif f.default_factory is not dataclasses.MISSING:
                object.__setattr__(defaults, f.name, f.default_factory())
            else:
                object.__setattr__(defaults, f.name, None)  # a required key: nothing to check
        check_fields(defaults)


@pytest.mark.parametrize("build, message", [
    # classes that did not check their fields before they had the base
    (lambda: __import__("attnas.strategies.one_shot_config", fromlist=["x"]).EvolutionConfig(parents=0),
     r"^parents: must be >= 1, got 0$"),
    (lambda: __import__("attnas.tasks.heterophilous", fromlist=["x"]).CSBMConfig(phi=2.0),
     r"^phi: must be in \[-1, 1\], got 2.0$"),
    (lambda: __import__("attnas.spaces.gnn_baselines", fromlist=["x"]).GNNBaselineConfig(gcn_dropout=1.0),
     r"^gcn_dropout: must be in \[0, 1\), got 1.0$"),
    (lambda: __import__("attnas.spaces.autoattend_text", fromlist=["x"]).TextAdapterConfig(pooling="min"),
     r"^pooling: 'min' is not a valid choice; valid: max, mean, max\+mean$"),
    (lambda: __import__("attnas.config", fromlist=["x"]).CompareConfig(seeds=0), r"^seeds: must be >= 1, got 0$"),
    # the type, not only the range, of a value set in code
    (lambda: TrainConfig(epochs="3"), r"^epochs: expected an integer, got '3'$"),
    (lambda: TrainConfig(lr=float("nan")), r"^lr: must be a finite number, got nan$"),
    # a prefix the class declares for its messages
    (lambda: __import__("attnas.spaces.enas", fromlist=["x"]).EnasConfig(layers=0),
     r"^space\.layers: must be >= 1, got 0$"),
])
def test_a_value_set_in_code_is_held_to_its_type(build, message):
    with pytest.raises(ConfigError, match=message):
        build()


def test_numpy_numbers_set_in_code_are_accepted():
    assert TrainConfig(epochs=np.int64(3), lr=np.float32(0.5)).epochs == 3


def test_a_recipe_value_is_range_checked_once(monkeypatch):
    checked: Counter[str] = Counter()
    real_check = Range.check

    def counting_check(self, value, path):
        checked[path] += 1
        real_check(self, value, path)

    monkeypatch.setattr(Range, "check", counting_check)
    load_config("autoattend-cora-quick", ["strategy.evolution.parents=7", "retrain.epochs=3"])
    assert checked["strategy.evolution.parents"] == 1
    assert checked["retrain.epochs"] == 1
    assert max(checked.values()) == 1, [p for p, n in checked.items() if n > 1]


def test_the_former_names_of_renamed_options_stay_importable():
    from attnas.data.text_csv import CsvConfig, CsvOptions
    from attnas.graphvae.bo import BOConfig, BOSettings
    from attnas.graphvae.gp import SparseGPConfig, SparseGPSettings
    from attnas.graphvae.metrics import Table1Config, Table1Settings
    from attnas.graphvae.train import TrainSettings, VAETrainConfig
    from attnas.spaces.autoattend_text import TextAdapterConfig, TextAdapterOptions

    pairs = [(CsvOptions, CsvConfig), (BOSettings, BOConfig), (SparseGPSettings, SparseGPConfig),
             (Table1Settings, Table1Config), (TrainSettings, VAETrainConfig), (TextAdapterOptions, TextAdapterConfig)]
    assert all(old is new for old, new in pairs)


def test_a_fixed_length_tuple_is_checked_place_by_place():
    from typing import Annotated

    from attnas.config.values import Range, coerce

    pair = tuple[Annotated[int, Range(1)], str]
    assert coerce([3, "mean"], pair, "x") == (3, "mean")
    with pytest.raises(ConfigError, match=r"x: expected 2 items, got 3"):
        coerce([3, "mean", "max"], pair, "x")
    with pytest.raises(ConfigError, match=r"x\[1\]: expected a string, got 4"):
        coerce([3, 4], pair, "x")
    with pytest.raises(ConfigError, match=r"x\[0\]: must be >= 1, got 0"):
        coerce([0, "mean"], pair, "x")
    assert coerce([1, 2, 3], tuple[int, ...], "y") == (1, 2, 3)  # a tuple of any length keeps one item type
