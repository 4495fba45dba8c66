"""Measured costs: what each cost counts, the generators left alone, the cache in the run directory."""

from __future__ import annotations

import json
import random

import pytest
import torch

from attnas.costs import COSTS, COSTS_FILE, CostModel, CostsConfig, batch_signature, measure


class _SumLoss:
    """A task stand-in whose loss is the sum of the output."""

    def loss(self, out, batch):
        return out.sum()


def test_measure_counts_what_the_docstring_says():
    torch.manual_seed(0)
    model = torch.nn.Linear(1000, 1000, bias=False)
    x = torch.randn(256, 1000)
    before = torch.get_rng_state()
    costs = measure(model, _SumLoss(), x, list(COSTS), warmup=1, repeats=3)
    assert torch.equal(torch.get_rng_state(), before)
    assert set(costs) == set(COSTS)
    assert costs["params"] == 1000 * 1000
    assert costs["macs"] == 256 * 1000 * 1000
    # the backward's peak: the weight, its gradient and the input (the output is freed after the
    # sum, which does not keep it for the backward)
    assert costs["peak_memory_mb"] == pytest.approx((2 * 1000 * 1000 + 256 * 1000) * 4 / 2**20, rel=1e-3)
    assert costs["latency_ms"] > 0 and costs["train_step_ms"] > 0
    assert model.weight.grad is None and model.training  # gradients cleared, mode restored


def test_measure_refuses_an_unknown_cost():
    with pytest.raises(ValueError, match="unknown cost 'flops'"):
        measure(torch.nn.Linear(2, 2), _SumLoss(), torch.zeros(1, 2), ["flops"])


def test_batch_signature_keeps_tensor_shapes_and_leaves_caches_out():
    from attnas.tasks.node_classification import NodeBatch

    batch = NodeBatch(torch.zeros(5, 3), torch.zeros(2, 7, dtype=torch.long), torch.zeros(5, dtype=torch.long),
                      None, key="g", cache={})
    sig = batch_signature(batch)
    assert sig == {"x": [5, 3, "float32"], "edge_index": [2, 7, "int64"], "y": [5, "int64"]}
    batch.cache["adj"] = torch.zeros(5, 5)  # filled while a model runs: the input size stays the same
    assert batch_signature(batch) == sig


@pytest.fixture(scope="module")
def digits_parts(tiny_recipe_data):
    from attnas.build import build_space, build_task, pick_device
    from attnas.config import load_config
    from attnas.data.root import resolve_data_root

    cfg = load_config(tiny_recipe_data)
    return build_space(cfg), build_task(cfg, resolve_data_root(), pick_device("cpu"))


def test_costs_are_cached_in_the_run_directory_and_reused(tmp_path, digits_parts):
    from attnas.runs import RunDir

    space, task = digits_parts
    run = RunDir.create(tmp_path / "run", "name: x\n", {})
    options = CostsConfig(warmup=0, repeats=1)
    archs = [space.sample(random.Random(i)) for i in range(3)]
    first = CostModel(space, task, run, options, default_batch_size=64)
    measured = [first.costs(a, ["params", "latency_ms"]) for a in archs]
    assert first.measured == 3
    assert [first.costs(a, ["params", "latency_ms"]) for a in archs] == measured and first.measured == 3
    for arch, costs in zip(archs, measured):  # params are those of the standalone network
        assert costs["params"] == sum(p.numel() for p in space.build(arch, task).parameters())
    first.close()
    rows = [json.loads(line) for line in run.file(COSTS_FILE).read_text().splitlines()]
    assert len(rows) == 3 and rows[0]["input"]["x"] == [1797, 64, "float32"]

    # a resumed search reads the file: the same values, nothing measured again
    second = CostModel(space, task, run, options, default_batch_size=64)
    assert [second.costs(a, ["params", "latency_ms"]) for a in archs] == measured
    assert second.measured == 0 and second.seconds == 0.0
    # a cost not measured yet is measured and appended; another protocol is another key
    second.costs(archs[0], ["macs"])
    assert second.measured == 1
    third = CostModel(space, task, run, CostsConfig(warmup=0, repeats=2), default_batch_size=64)
    assert third.key(archs[0]) != second.key(archs[0])
    third.costs(archs[0], ["params"])
    assert third.measured == 1
    run.close()


def test_costs_config_is_checked():
    from attnas.errors import ConfigError

    with pytest.raises(ConfigError, match=r"costs.repeats: must be >= 1, got 0"):
        CostsConfig(repeats=0)
