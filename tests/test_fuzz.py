"""Fuzzing the parsers users feed by hand: Arch documents and recipes.

Random JSON-ish documents never make the Arch parser or a space's validation fail with
anything but :class:`ArchError`, and valid ones round-trip; random recipe mappings and
``--set`` strings give :class:`ConfigError` or a valid config, never another exception.
"""

from __future__ import annotations

import copy
import json
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnas import registry
from attnas.config import config_from_dict, load_config
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError

# ATTNAS_FUZZ_EXAMPLES=5000 for a longer hunt
FUZZ = settings(max_examples=int(os.environ.get("ATTNAS_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers(-10, 10) | st.integers() | \
    st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8) | \
    st.sampled_from(["zero", "identity", "gcn", "gat_2", "add", "attn", "layers", "inputs", "source", "op", "type"])
json_ish = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) |
                        st.dictionaries(st.text(max_size=6) | st.sampled_from(["space", "choices", "layers"]), inner,
                                        max_size=4), max_leaves=20)


def arch_docs():
    keys = st.sampled_from(["space", "version", "choices", "meta", "extra"])
    return json_ish | st.dictionaries(keys, json_ish | st.just("autoattend") | st.just(1), max_size=5)


@FUZZ
@given(arch_docs())
def test_arch_parser_raises_only_arch_error_and_round_trips(doc):
    try:
        arch = Arch.from_dict(doc)
    except ArchError:
        return
    again = Arch.from_json(arch.to_json())
    assert again == arch and again.to_dict() == arch.to_dict() and again.key() == arch.key()


@FUZZ
@given(st.text(max_size=40) | json_ish.map(json.dumps))
def test_arch_text_parser_raises_only_arch_error(text):
    try:
        Arch.from_json(text)
    except ArchError:
        pass


def test_deeply_nested_arch_text_is_an_arch_error():
    with pytest.raises(ArchError):
        Arch.from_json("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ArchError):
        Arch.from_json('{"space": "x", "choices": {"a": ' + "[" * 5000 + "]" * 5000 + "}}")


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _replace(node, path, value):
    if not path:
        return value
    node = copy.deepcopy(node)
    parent = node
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return node


def _spaces():
    return [(name, registry.get("space", name)()) for name in registry.names("space")]


SPACES = _spaces()


@pytest.mark.parametrize("name,space", SPACES, ids=[n for n, _ in SPACES])
@FUZZ
@given(seed=st.integers(0, 2**16), pick=st.integers(0, 10_000), value=json_ish, drop=st.booleans())
def test_space_validation_raises_only_arch_error(name, space, seed, pick, value, drop):
    """A sampled architecture with one part replaced (or removed) by random JSON."""
    arch = space.sample(random.Random(seed))
    space.validate(arch)
    paths = list(_paths(arch.choices))
    path = paths[pick % len(paths)]
    if drop and path:
        choices = copy.deepcopy(arch.choices)
        parent = choices
        for p in path[:-1]:
            parent = parent[p]
        del parent[path[-1]]
    else:
        choices = _replace(arch.choices, path, value)
    try:
        mutated = Arch(space.name, choices) if isinstance(choices, dict) else Arch(space.name, {"x": choices})
        space.validate(mutated)
    except ArchError:
        return
    assert Arch.from_json(mutated.to_json()) == mutated


TINY = {"name": "t", "seed": 0, "task": {"name": "node-classification", "dataset": "digits-graph"},
        "space": {"name": "autoattend", "layers": 2, "hidden": 8},
        "strategy": {"name": "one-shot-evolution", "supernet": {"epochs": 1}},
        "retrain": {"epochs": 1}}


@FUZZ
@given(pick=st.integers(0, 10_000), value=json_ish, key=st.none() | st.text(max_size=6))
def test_config_loader_raises_only_config_error(pick, value, key):
    paths = [p for p in _paths(TINY) if p]
    path = paths[pick % len(paths)]
    doc = _replace(TINY, path, value) if key is None else _replace(TINY, (*path[:-1], key), value)
    try:
        cfg = config_from_dict(doc)
    except ConfigError:
        return
    assert config_from_dict(cfg.to_dict()) == cfg  # a valid config round-trips


@FUZZ
@given(json_ish)
def test_config_loader_on_any_document(doc):
    try:
        config_from_dict(doc)
    except ConfigError:
        pass


dotted = st.sampled_from(["seed", "name", "space.hidden", "space.layers", "space.ops", "space.name", "task.dataset",
                          "strategy.supernet.epochs", "strategy.evolution", "retrain.lr", "retrain", "x.y", "",
                          "space..hidden", ".", "strategy.name"])


@FUZZ
@given(st.lists(st.text(max_size=20) | st.builds(lambda k, v: f"{k}={v}", dotted, st.text(max_size=12)) |
                st.builds(lambda k, v: f"{k}={json.dumps(v)}", dotted, json_ish), max_size=3))
def test_set_overrides_raise_only_config_error(overrides):
    try:
        cfg = load_config(TINY, overrides)
    except ConfigError:
        return
    assert config_from_dict(cfg.to_dict()) == cfg
