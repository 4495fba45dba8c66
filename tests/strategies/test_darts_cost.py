"""The expected-cost term of the DARTS strategies: per-operation costs, the term, the config."""

from __future__ import annotations

import random

import pytest
import torch

from attnas.config import load_config
from attnas.core.errors import ConfigError
from attnas.runs.run_dir import RunDir
from attnas.strategies.darts import Darts
from attnas.strategies.darts_config import CostTermConfig, DartsConfig
from attnas.strategies.darts_cost import ExpectedCost

from test_darts import tiny, tiny_parts  # tests/strategies is on sys.path (pytest prepends it)


def _params(space, task, arch) -> int:
    return sum(p.numel() for p in space.build(arch, task).parameters())


def test_per_operation_costs_add_up_to_the_measured_cost_of_any_cell():
    cfg, space, task = tiny_parts()
    model = space.relaxed(task)
    cost = ExpectedCost(space, task, model, "params")
    rows, cols = model.alpha.shape
    assert tuple(cost.delta.shape) == (rows, cols) and cost.measured == 1 + rows * (cols - 1)
    rng = random.Random(0)
    for _ in range(3):  # a cell with several changes from column 0: the sum of the single changes
        choice = [rng.randrange(cols) for _ in range(rows)]
        one_hot = torch.full((rows, cols), -1e4)
        one_hot[range(rows), choice] = 0.0
        assert float(cost.expected(one_hot)) == pytest.approx(_params(space, task, space.alpha_arch(choice)))
    costliest = cost.delta.argmax(dim=1).tolist()  # the costliest cell: the costliest operation per edge
    assert cost.top == pytest.approx(_params(space, task, space.alpha_arch(costliest)))
    cheapest = cost.delta.argmin(dim=1).tolist()
    assert cost.bottom == pytest.approx(_params(space, task, space.alpha_arch(cheapest)))
    assert cost.top > cost.base >= cost.bottom
    # the term: 0 at the cheapest cell, 1 at the costliest, in between for uniform mixing

    def one_hot(choice):
        a = torch.full((rows, cols), -1e4)
        a[range(rows), choice] = 0.0
        return a
    assert float(cost.fraction(one_hot(cheapest))) == pytest.approx(0.0, abs=1e-6)
    assert float(cost.fraction(one_hot(costliest))) == pytest.approx(1.0)
    assert 0 < float(cost.fraction(torch.zeros(rows, cols))) < 1


def _search(tmp_path, name, weight):
    cfg = load_config(tiny(epochs=3, cost={"name": "params", "weight": weight}))
    _, space, task = tiny_parts()
    run = RunDir.create(tmp_path / name, cfg.to_yaml(), {})
    try:
        result = Darts(cfg.strategy.options, space, task, run, seed=0).search()
        events = run.events("darts")
    finally:
        run.close()
    return result, events, space, task


def test_a_large_cost_weight_derives_cheaper_operations(tmp_path):
    plain, plain_events, space, task = _search(tmp_path, "plain", 0.0)
    cheap, events, _, _ = _search(tmp_path, "cheap", 20.0)
    assert "expected_params" not in plain.metrics and "expected_params" not in plain_events[-1]
    assert _params(space, task, cheap.arch) < _params(space, task, plain.arch)
    # the expected cost falls epoch by epoch, and the metrics carry the final one
    expected = [e["expected_params"] for e in events]
    assert expected == sorted(expected, reverse=True) and expected[0] > expected[-1]
    assert cheap.metrics["expected_params"] == pytest.approx(expected[-1], abs=0.01)
    # every edge of the cheap cell carries an operation cheaper than its edge's average
    model = space.relaxed(task)
    cost = ExpectedCost(space, task, model, "params")
    ops = space.options.ops
    for r, key in enumerate(space.edge_keys):
        c = ops.index(cheap.arch.choices["edges"][key])
        assert cost.delta[r, c] <= cost.delta[r].mean(), key


def test_cost_options_are_checked():
    with pytest.raises(ConfigError, match=r"^strategy.cost.name: 'latency_ms' is not a valid choice; "
                                          r"valid: params, macs$"):
        load_config(tiny(cost={"name": "latency_ms", "weight": 1.0}))
    with pytest.raises(ConfigError, match=r"^strategy.cost.name: 'parms' is not a valid choice \(did you mean"):
        load_config(tiny(cost={"name": "parms"}))
    with pytest.raises(ConfigError, match=r"^strategy.cost.weight: must be >= 0, got -1"):
        load_config(tiny(cost={"weight": -1}))
    with pytest.raises(ConfigError, match=r"^strategy.cost.scale: unknown key"):
        load_config(tiny(cost={"scale": 2}))
    with pytest.raises(ConfigError, match=r"^cost.name: 'flops' is not a valid choice"):
        CostTermConfig(name="flops")
    assert DartsConfig().cost.weight == 0.0  # off by default
