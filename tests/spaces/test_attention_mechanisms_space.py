"""The attention-mechanism space: validation, sampling, size, models and supernet."""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace

import pytest
import torch

from attnas.config import from_mapping
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError
from attnas.models.transformer_encoder import HeterogeneousAttention, TransformerEncoderClassifier
from attnas.ops.attention_mechanisms import mechanism_names
from attnas.spaces.attention_mechanisms import AttentionMechanismsConfig, AttentionMechanismSpace
from attnas.tasks.base import TaskInfo

CANDS = ("softmax", "linear", "local")


def space(**kw):
    opts = {"candidates": list(CANDS), "dim": 8, "depth": 2, "heads": 2, "ffn_dim": 8, "pool": "mean",
            "mechanism_options": {"local": {"window": 4}}, **kw}
    return AttentionMechanismSpace(from_mapping(AttentionMechanismsConfig, opts))


class FakeSequenceTask:
    """Just what the space reads from a task: its info."""

    def __init__(self, kind="sequence"):
        self.info = TaskInfo(kind=kind, in_dim=16, num_classes=10, multilabel=False,
                             extra={"vocab_size": 16, "max_len": 20, "pad_id": 0})


def arch(mechanism):
    return Arch("attention-mechanisms", {"mechanism": mechanism})


def test_valid_architectures_pass():
    s = space()
    s.validate(arch("linear"))
    s.validate(arch({"softmax": 1, "local": 1}))
    s.validate(arch({"local": 2}))


@pytest.mark.parametrize("mechanism, message", [
    ("softmx", r"unknown attention mechanism 'softmx' \(did you mean 'softmax'\?\)"),
    ("performer", r"'performer' is not a candidate of this space; candidates: softmax, linear, local"),
    ({"softmax": 1, "lokal": 1}, r"choices.mechanism.lokal: unknown attention mechanism 'lokal'"),
    ({"softmax": 3}, r"the cell has 3 single heads but the space has heads=2"),
    ({"softmax": 0, "local": 2}, r"choices.mechanism.softmax: heads must be a positive integer"),
    ({"softmax": 1.5}, r"heads must be a positive integer, got 1.5"),
    ({}, r"expected a mechanism name or a \{mechanism: heads\} mapping"),
    (3, r"expected a mechanism name or a \{mechanism: heads\} mapping"),
])
def test_bad_architectures_name_the_problem(mechanism, message):
    with pytest.raises(ArchError, match=message):
        space().validate(arch(mechanism))


def test_bad_keys_and_other_spaces_are_refused():
    s = space()
    with pytest.raises(ArchError, match="choices.heads: unknown key"):
        s.validate(Arch("attention-mechanisms", {"mechanism": "local", "heads": 3}))
    with pytest.raises(ArchError, match="choices.mechanism: required key is missing"):
        s.validate(Arch("attention-mechanisms", {}))
    with pytest.raises(ArchError, match="not 'attention-mechanisms'"):
        s.validate(Arch("autoattend", {"mechanism": "local"}))


@pytest.mark.parametrize("options, message", [
    ({"candidates": ["softmax", "perfomer"]}, r"candidates: unknown attention mechanism 'perfomer' \(did you mean"),
    ({"candidates": ["softmax", "softmax"]}, r"candidates: softmax listed more than once"),
    ({"candidates": []}, r"candidates: the space needs at least one mechanism"),
    ({"dim": 10, "heads": 4}, r"dim: 10 is not divisible by heads 4"),
    ({"mechanism_options": {"locall": {"window": 4}}}, r"mechanism_options: unknown attention mechanism 'locall'"),
    ({"mechanism_options": {"local": {"windw": 4}}}, r"mechanism_options.local.windw: unknown option; valid:"),
    ({"mechanism_options": {"local": 4}}, r"mechanism_options.local: expected a mapping"),
    ({"dropout": 1.0}, r"dropout: must be in \[0, 1\)"),
    ({"pool": "max"}, r"space.pool: 'max' is not a valid choice"),
])
def test_bad_config_names_the_key(options, message):
    with pytest.raises(ConfigError, match=message):
        from_mapping(AttentionMechanismsConfig, options, "space")


def test_default_candidates_are_every_registered_mechanism():
    assert set(AttentionMechanismsConfig().candidates) == set(mechanism_names())


def _enumerate(cands, heads):
    out = [{"mechanism": c} for c in cands]
    for combo in itertools.combinations_with_replacement(cands, heads):
        out.append({"mechanism": {c: combo.count(c) for c in cands if combo.count(c)}})
    return out


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_size_counts_every_valid_architecture(heads):
    s = space(heads=heads, dim=8)
    every = _enumerate(CANDS, heads)
    for choices in every:
        s.validate(Arch("attention-mechanisms", choices))
    assert s.size() == len(every)


def test_sample_and_mutate_give_valid_different_neighbours():
    s = space(heads=2)
    rng = random.Random(0)
    seen = set()
    for _ in range(40):
        a = s.sample(rng)
        s.validate(a)
        seen.add(a.choices["mechanism"])
        b = s.mutate(a, rng)
        s.validate(b)
        assert b.key() != a.key()
    assert seen == set(CANDS)
    cell = arch({"softmax": 1, "local": 1})
    for _ in range(20):
        m = s.mutate(cell, rng)
        s.validate(m)
        assert m.key() != cell.key()


def test_build_gives_the_ordinary_encoder_with_the_chosen_mechanism():
    s, task = space(), FakeSequenceTask()
    model = s.build(arch("local"), task)
    assert isinstance(model, TransformerEncoderClassifier)
    assert len(model.layers) == 2
    assert all(layer.attention.mechanism == "local" and layer.attention.heads == 2 for layer in model.layers)
    assert model.layers[0].attention.window == 4  # the space's mechanism_options reach the block
    cell = s.build(arch({"softmax": 1, "local": 1}), task)
    att = cell.layers[1].attention
    assert isinstance(att, HeterogeneousAttention) and att.heads == {"softmax": 1, "local": 1}
    assert [b.heads for b in att.blocks] == [1, 1] and att.blocks[0].head_dim == 4
    g = torch.Generator().manual_seed(0)
    mask = torch.arange(20)[None] < torch.tensor([20, 7])[:, None]
    batch = {"tokens": torch.randint(1, 16, (2, 20), generator=g) * mask, "mask": mask}
    assert model(batch).shape == cell(batch).shape == (2, 10)


def test_supernet_holds_one_block_per_candidate_or_h_single_heads():
    s, task = space(), FakeSequenceTask()
    homog = s.supernet(task)
    assert homog.block_names == list(CANDS)
    hetero = s.supernet(task, mode="heterogeneous")
    assert hetero.block_names == [f"{m}/{i}" for m in CANDS for i in range(2)]
    hetero.drop("linear/0")
    hetero.drop("linear/1")
    hetero.drop("softmax/1")
    hetero.drop("local/0")
    assert s.arch_from_kept(hetero.kept()).choices == {"mechanism": {"softmax": 1, "local": 1}}


def test_non_sequence_tasks_are_refused():
    with pytest.raises(ConfigError, match="needs a token-sequence task"):
        space().build(arch("local"), FakeSequenceTask(kind="graph"))
    with pytest.raises(ConfigError, match="needs a token-sequence task"):
        space().supernet(SimpleNamespace(info=FakeSequenceTask(kind="graph").info))


def test_to_dag_draws_the_cell():
    adj, labels = space().to_dag(arch({"softmax": 1, "local": 1}))
    assert labels == ["input", "softmax", "local", "mean", "output"]
    assert adj.sum() == 2 + 2 + 1 and adj[0, 1] and adj[2, 3] and adj[3, 4]
    adj, labels = space().to_dag(arch("linear"))
    assert labels == ["input", "linear", "linear", "concat+W_O", "output"]


@pytest.mark.parametrize("recipe", ["mechanism-listops-quick", "mechanism-listops"])
def test_per_mechanism_recipes_take_every_mechanism_by_override(recipe):
    from attnas.config import load_config
    from attnas.runs.build import build_space

    for name in mechanism_names():
        cfg = load_config(recipe, [f"strategy.arch.mechanism={name}"])
        s = build_space(cfg)
        s.validate(Arch(s.name, dict(cfg.strategy.options.arch)))
    with pytest.raises(ArchError, match="unknown attention mechanism 'lineer'"):
        cfg = load_config(recipe, ["strategy.arch.mechanism=lineer"])
        build_space(cfg).validate(Arch("attention-mechanisms", dict(cfg.strategy.options.arch)))


def test_per_layer_lists_are_checked_layer_by_layer():
    s = space()
    s.validate(arch(["softmax", "linear"]))
    s.validate(arch(["local", {"softmax": 1, "linear": 1}]))
    with pytest.raises(ArchError, match=r"a per-layer list needs 2 entries \(space depth\), got 3"):
        s.validate(arch(["softmax", "linear", "local"]))
    with pytest.raises(ArchError, match=r"choices.mechanism\[1\]: 'performer' is not a candidate"):
        s.validate(arch(["softmax", "performer"]))
    with pytest.raises(ArchError, match=r"choices.mechanism\[0\]: the cell has 3 single heads"):
        s.validate(arch([{"softmax": 3}, "linear"]))


def test_per_layer_layout_samples_and_mutates_one_mechanism_per_layer():
    s = space(layout="per-layer")
    assert s.size() == len(CANDS) ** 2
    rng = random.Random(0)
    seen = set()
    for _ in range(60):
        a = s.sample(rng)
        s.validate(a)
        seen.add(tuple(a.choices["mechanism"]))
        b = s.mutate(a, rng)
        s.validate(b)
        assert sum(x != y for x, y in zip(a.choices["mechanism"], b.choices["mechanism"])) == 1
    assert len(seen) == len(CANDS) ** 2  # every hybrid, the homogeneous ones included, is drawn
    assert space().sample(random.Random(0)).choices["mechanism"] in CANDS  # the default draws one for all


def test_a_per_layer_hybrid_builds_one_mechanism_per_layer():
    s, task = space(), FakeSequenceTask()
    model = s.build(arch(["linear", "local"]), task)
    assert model.mechanism == ["linear", "local"]
    names = [type(layer.attention).__name__ for layer in model.layers]
    homogeneous = [type(s.build(arch(m), task).layers[0].attention).__name__ for m in ("linear", "local")]
    assert names == homogeneous
    batch = {"tokens": torch.randint(1, 16, (3, 12)), "mask": torch.ones(3, 12, dtype=torch.bool)}
    assert model(batch).shape == (3, 10)
    assert "linear x2 heads | local x2 heads (per layer)" in s.describe(arch(["linear", "local"]))
    adj, labels = s.to_dag(arch(["linear", "local"]))
    assert labels == ["input", "linear", "local", "output"] and adj.sum() == 3 and adj[1, 2]


def test_heterogeneous_layout_draws_every_cell_uniformly_and_mutates_one_head():
    s = space(layout="heterogeneous", heads=3, dim=9)
    cells = list(itertools.combinations_with_replacement(CANDS, 3))
    assert s.size() == len(cells) == 10
    rng = random.Random(0)
    counts = {}
    for _ in range(2000):
        a = s.sample(rng)
        s.validate(a)
        cell = a.choices["mechanism"]
        assert list(cell) == [c for c in CANDS if c in cell]  # candidate order, no zero counts
        counts[tuple(sorted(cell.items()))] = counts.get(tuple(sorted(cell.items())), 0) + 1
        b = s.mutate(a, rng).choices["mechanism"]
        assert sum(abs(cell.get(c, 0) - b.get(c, 0)) for c in CANDS) == 2  # one head moved
    assert len(counts) == 10
    assert min(counts.values()) > 150 and max(counts.values()) < 250  # 200 each if uniform over cells
