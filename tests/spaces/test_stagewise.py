"""The stage-wise full-attention space: size, sampling, validation, build, relaxation, derive."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attnas import registry
from attnas.config import from_mapping
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError, UnsupportedError
from attnas.models.stagewise_network import RelaxedStagewiseNetwork, StagewiseNetwork
from attnas.ops.fullattn.self_attention_block import CANDIDATES
from attnas.spaces.stagewise import StagewiseConfig, StagewiseSpace
from attnas.tasks.base import TaskInfo



@pytest.fixture(autouse=True)
def _one_thread():
    """The relaxed network runs ~100 small blocks: one thread avoids OpenMP hand-offs on a busy machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)

def _task(channels=1, classes=3, size=8):
    """A stand-in task: only ``info`` is used by the space."""
    return SimpleNamespace(info=TaskInfo("image", channels, classes, extra={"image_size": size}))


def test_registered_with_capabilities():
    assert registry.get("space", "stagewise") is StagewiseSpace
    assert StagewiseSpace.capabilities == {"relaxed", "dag"}
    StagewiseSpace().require("relaxed", "darts")
    with pytest.raises(UnsupportedError, match="one-shot"):
        StagewiseSpace().require("one-shot", "one-shot-evolution")


def test_size_is_seven_to_the_fifteen_or_six_when_shared():
    assert StagewiseSpace().size() == 7**15
    assert StagewiseSpace(StagewiseConfig(shared_stages=True)).size() == 7**6


def test_config_from_yaml_mapping_and_bad_widths():
    cfg = from_mapping(StagewiseConfig, {"init_channels": 32, "shared_stages": True})
    assert cfg.init_channels == 32 and cfg.shared_stages
    with pytest.raises(ConfigError, match="multiple of 8"):
        StagewiseConfig(init_channels=24)
    with pytest.raises(ConfigError, match="impls: unknown key"):
        from_mapping(StagewiseConfig, {"impls": "fused"})


@pytest.mark.parametrize("impl", ["fused", "fast", "unfold", "cuda"])
def test_the_retired_impl_option_still_loads_with_a_warning(impl, caplog):
    """``space.impl`` (fast / unfold / fused) is gone: kernels are chosen by the kernel switch
    alone. A recipe or a run's saved config.yaml that sets it loads with a logged warning."""
    with caplog.at_level("WARNING", logger="attnas.config.values"):
        cfg = from_mapping(StagewiseConfig, {"impl": impl, "init_channels": 32}, "space")
    assert cfg == StagewiseConfig(init_channels=32)
    assert "space.impl: no longer an option, ignored" in caplog.text


def test_sample_is_valid_and_reproducible_and_mutate_changes_one_layer():
    space = StagewiseSpace()
    a = space.sample(random.Random(3))
    assert a == space.sample(random.Random(3))
    space.validate(a)
    assert len(a.choices["layers"]) == 15
    b = space.mutate(a, random.Random(4))
    space.validate(b)
    assert sum(x != y for x, y in zip(a.choices["layers"], b.choices["layers"])) == 1


def test_shared_stages_sampling_and_mutation_keep_the_sharing():
    space = StagewiseSpace(StagewiseConfig(shared_stages=True))
    rng = random.Random(0)
    a = space.sample(rng)
    for _ in range(5):
        a = space.mutate(a, rng)
        ops = a.choices["layers"]
        assert ops[0:3] == ops[6:9] == ops[12:15]
        assert ops[3:6] == ops[9:12]


def test_validate_names_the_problem():
    space = StagewiseSpace()
    good = ["local_sa_k3_h4"] * 15
    with pytest.raises(ArchError, match=r"layers\[4\] \(stage 2, layer 2\).*'local_sa_k9_h4'"):
        space.validate(space.arch({"layers": good[:4] + ["local_sa_k9_h4"] + good[5:]}))
    with pytest.raises(ArchError, match="15 operations.*got 14 entries"):
        space.validate(space.arch({"layers": good[:14]}))
    with pytest.raises(ArchError, match="unknown key 'cells'"):
        space.validate(space.arch({"layers": good, "cells": []}))
    with pytest.raises(ArchError, match="space 'other'"):
        space.validate(Arch("other", {"layers": good}))
    shared = StagewiseSpace(StagewiseConfig(shared_stages=True))
    with pytest.raises(ArchError, match=r"layers\[6\].*must equal layers\[0\]"):
        shared.validate(shared.arch({"layers": ["non_local_sa"] + good[1:]}))


def test_build_gives_a_standalone_classifier():
    space = StagewiseSpace()
    arch = space.sample(random.Random(0))
    net = space.build(arch, _task(channels=1, classes=3))
    assert isinstance(net, StagewiseNetwork)
    x = torch.randn(2, 1, 8, 8)
    assert net((x, torch.zeros(2))).shape == (2, 3)
    assert net.features(x).shape == (2, 64, 2, 2)
    # roundtrip through JSON builds the same network
    again = space.build(Arch.from_json(arch.to_json()), _task(channels=1, classes=3))
    assert again.ops == net.ops


def test_relaxed_alpha_starts_at_zero_and_parameters_are_disjoint():
    relaxed = StagewiseSpace().relaxed(_task())
    assert isinstance(relaxed, RelaxedStagewiseNetwork)
    (alpha,) = relaxed.arch_parameters()
    assert alpha.shape == (15, 7) and torch.equal(alpha, torch.zeros(15, 7))
    weights = relaxed.weight_parameters()
    ids = {id(p) for p in weights}
    assert id(alpha) not in ids
    assert ids | {id(alpha)} == {id(p) for p in relaxed.parameters()}
    shared = StagewiseSpace(StagewiseConfig(shared_stages=True)).relaxed(_task())
    assert shared.alpha.shape == (6, 7)


def test_relaxed_equals_discrete_when_alpha_is_one_hot():
    torch.manual_seed(0)
    space = StagewiseSpace()
    task = _task(channels=2, classes=4)
    relaxed = space.relaxed(task)
    arch = space.sample(random.Random(1))
    with torch.no_grad():
        relaxed.alpha.zero_()
        for layer, op in enumerate(arch.choices["layers"]):
            relaxed.alpha[layer, CANDIDATES.index(op)] = 1e4
    net = space.build(arch, task)
    net.load_state_dict(relaxed.subnet_state_dict(arch.choices["layers"]))
    # float64: BatchNorm on 2x2 maps would magnify float32 rounding differences
    relaxed, net = relaxed.double(), net.double()
    x = torch.randn(2, 2, 8, 8, dtype=torch.float64)
    torch.testing.assert_close(relaxed(x), net(x), rtol=1e-9, atol=1e-9)
    assert space.derive(relaxed) == arch


def test_derive_takes_the_argmax_per_layer_and_shared_rows_expand():
    space = StagewiseSpace(StagewiseConfig(shared_stages=True))
    relaxed = space.relaxed(_task())
    with torch.no_grad():
        relaxed.alpha.copy_(torch.arange(6 * 7, dtype=torch.float32).view(6, 7) % 7)  # argmax: last candidate
        relaxed.alpha[4, 2] = 100.0  # stages 2 and 4, second layer
    ops = space.derive(relaxed).choices["layers"]
    assert ops[4] == ops[10] == CANDIDATES[2]
    assert all(op == CANDIDATES[6] for i, op in enumerate(ops) if i not in (4, 10))
    with pytest.raises(ArchError, match="layer sharing"):
        StagewiseSpace().derive(relaxed)


def test_relaxed_gradients_reach_alpha():
    relaxed = StagewiseSpace().relaxed(_task())
    relaxed(torch.randn(2, 1, 8, 8)).sum().backward()
    assert relaxed.alpha.grad is not None and relaxed.alpha.grad.abs().sum() > 0


def test_to_dag_is_the_chain_of_blocks():
    space = StagewiseSpace()
    arch = space.sample(random.Random(2))
    adj, labels = space.to_dag(arch)
    assert labels == ["input", "local_sa_k3_h8", *arch.choices["layers"], "output"]
    assert adj.shape == (18, 18)
    assert np.array_equal(adj, np.eye(18, k=1, dtype=adj.dtype))
    assert "stage 5:" in space.describe(arch)


def test_final_channels_widen_the_built_network_but_not_the_relaxation():
    space = StagewiseSpace(StagewiseConfig(init_channels=16, final_channels=32))
    arch = space.sample(random.Random(1))
    net = space.build(arch, _task())
    assert net.init_channels == 32 and net.features(torch.randn(1, 1, 8, 8)).shape == (1, 128, 2, 2)
    assert space.relaxed(_task()).init_channels == 16
    with pytest.raises(ConfigError, match="final_channels=24"):
        StagewiseConfig(final_channels=24)


def test_alpha_arch_takes_one_candidate_per_row_of_alpha():
    space = StagewiseSpace(StagewiseConfig(shared_stages=True))
    choice = [i % len(CANDIDATES) for i in range(space.num_groups)]
    arch = space.alpha_arch(choice)
    space.validate(arch)
    assert arch.choices["layers"] == [CANDIDATES[choice[g]] for g in space.layer_groups]
    with pytest.raises(ArchError, match=r"one column per layer group \(6\), got 2"):
        space.alpha_arch([0, 1])
