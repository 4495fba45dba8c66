"""The one YAML loader of recipes, ``--set`` values and run configs (attnas.config.yaml_loading)."""

from __future__ import annotations

import pytest
import yaml

from attnas.config.yaml_loading import MAX_DEPTH, dump_yaml, load_yaml
from attnas.core.errors import ConfigError


@pytest.mark.parametrize("text, value", [
    ("5e-3", 0.005), ("1e4", 10000.0), ("-2E+2", -200.0), (".5e1", 5.0), ("1.5e3", 1500.0),
    ("1.0e-05", 1e-05), ("3", 3), ("1_000", 1000), ("0x10", 16), ("e5", "e5"), ("1e", "1e"), ("1.2.3", "1.2.3"),
    ("5e-3x", "5e-3x"), ("'1e4'", "1e4"),
])
def test_yaml_1_2_numbers_and_nothing_else_become_floats(text, value):
    got = load_yaml(f"v: {text}", "t")["v"]
    assert got == value and type(got) is type(value)


def test_what_is_dumped_reads_back_the_same():
    data = {"name": "1e5", "lr": 1e-5, "labels": ["5e-3", "a"], "seed": 3, "nested": {"x": [1.5, "2e2"]}}
    assert load_yaml(dump_yaml(data), "t") == data


def test_duplicate_keys_are_refused_at_any_depth_and_merge_keys_still_work():
    with pytest.raises(ConfigError, match=r"t: duplicate key 'lr' at line 3 \(first at line 2\); keep one"):
        load_yaml("retrain:\n  lr: 1\n  lr: 2\n", "t")
    assert load_yaml("a: &a {x: 1, y: 2}\nb:\n  <<: *a\n  y: 3\n", "t")["b"] == {"x": 1, "y": 3}


def test_depth_and_expanded_size_are_bounded_before_construction():
    assert load_yaml("v: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1), "t")
    with pytest.raises(ConfigError, match=f"nested more than {MAX_DEPTH} levels deep"):
        load_yaml("v: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH, "t")
    shared = "a: &a [1, 2, 3]\n" + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}]\n" for p, c in zip("abcdefghijklm",
                                                                                            "bcdefghijklmn"))
    assert len(load_yaml(shared.split("\nj:")[0], "t")["i"]) == 3  # 3**9 values: under the bound, built once
    with pytest.raises(ConfigError, match="more than 1,000,000 values once its aliases are expanded"):
        load_yaml(shared, "t")  # 3**14


def test_long_integers_are_refused_with_their_line_and_malformed_yaml_is_yamls_error():
    with pytest.raises(ConfigError, match="t: line 2: an integer of 101 digits"):
        load_yaml("a: 1\nb: 1" + "0" * 100 + "\n", "t")
    assert load_yaml("a: " + "9" * 100, "t")["a"] == int("9" * 100)
    with pytest.raises(yaml.YAMLError):
        load_yaml("a: [1\n", "t")
    assert load_yaml("", "t") is None
