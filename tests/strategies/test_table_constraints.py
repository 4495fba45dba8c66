"""Constraints on a table's costs: every table strategy queries feasible architectures only."""

import random

import numpy as np
import pytest

pytest.importorskip("nas_bench_graph")

from attnas import pipeline, registry  # noqa: E402
from attnas.core.errors import ConfigError  # noqa: E402
from attnas.strategies.table_latent_bo import latent_bo  # noqa: E402
from attnas.strategies.table_search import LOOPS, random_search  # noqa: E402
from nas_bench_graph_tables import cora_space, cora_task  # noqa: E402

LIMIT = 1_197_575  # cora's median number of parameters: about half the table is over it


@pytest.fixture(scope="module")
def table():
    """The nine-operation space and cora's table."""
    return cora_space(), cora_task()


def constrained(space, task, limits=None, budget=60):
    q = task.validation_view(space.index.codes, space.index.neighbours)
    q.constrain(limits or {"params": LIMIT}, budget)
    return q


def test_costs_are_the_tables_latency_and_parameters_in_attnas_units(table):
    space, task = table
    q = task.validation_view(space.index.codes, space.index.neighbours)
    assert q.costs(7) == {"params": round(q.params[7] * 1e6), "latency_ms": q.latency[7] * 1e3}
    assert 0.4e6 < np.median(q.cost_column("params")) < 3e6 and 0.3 < np.median(q.cost_column("latency_ms")) < 10
    with pytest.raises(ConfigError, match="macs"):
        q.cost_column("macs")


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_every_loop_queries_feasible_architectures_only(table, name):
    space, task = table
    q = constrained(space, task, {"params": LIMIT, "latency_ms": 5.0})
    LOOPS[name](q, 60, random.Random(4))
    assert q.spent == 60 == len(set(q.trace))
    assert all(q.costs(i)["params"] <= LIMIT and q.costs(i)["latency_ms"] <= 5.0 for i in q.trace)
    assert 0.3 < q.feasible.mean() < 0.7


def test_latent_bo_queries_feasible_architectures_only(table):
    space, task = table
    q = constrained(space, task)
    latents = np.random.default_rng(0).normal(size=(q.n, 3))
    latent_bo(q, 30, random.Random(5), latents, initial=10, batch=10, pool=200)
    assert q.spent == 30 and q.feasible[q.trace].all()


def test_rejected_draws_do_not_count_and_draws_stay_paired(table):
    space, task = table
    """Under one constraint random search draws what it draws without, minus the rejected."""
    free = task.validation_view(space.index.codes, space.index.neighbours)
    random_search(free, 200, random.Random(6))
    q = constrained(space, task)
    random_search(q, 40, random.Random(6))
    feasible_draws = [i for i in free.trace if q.feasible[i]]
    assert q.trace == feasible_draws[:40] and q.rejected > 0 and q.spent == 40
    with pytest.raises(ValueError, match="over the constraints"):
        q.query(int(np.flatnonzero(~q.feasible)[0]))


def test_an_impossible_constraint_is_one_line_before_anything_is_written(tmp_path):
    recipe = {"name": "nbg", "seed": 0, "task": {"name": "nas-bench-graph", "dataset": "cora"},
              "space": {"name": "nas-bench-graph"},
              "strategy": {"name": "regularized-evolution", "budget": 20, "constraints": {"params": 1e5}}}
    with pytest.raises(ConfigError, match=r"strategy.constraints: 0 of the table's 26206 architectures meet "
                                          r"params <= 100000.*params >= 436743"):
        pipeline.search(recipe, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    for bad, message in [({"macs": 5}, "holds the costs"), ({"params": -1}, "number > 0"),
                         ({"parms": 5}, "unknown cost")]:
        with pytest.raises(ConfigError, match=message):
            registry.get("strategy", "table-random").Config(constraints=bad)


def test_a_constrained_multi_objective_search_writes_its_front_and_report(tmp_path):
    pytest.importorskip("pymoo")
    from attnas.reporting.report import write_report

    recipe = {"name": "nbg", "seed": 1, "task": {"name": "nas-bench-graph", "dataset": "cora"},
              "space": {"name": "nas-bench-graph"},
              "strategy": {"name": "regularized-evolution", "budget": 40, "population": 10,
                           "constraints": {"params": LIMIT}, "objectives": ["val_score", "params"]}}
    run = pipeline.search(recipe, out=tmp_path / "run")
    front = run.read_json("pareto.json")
    members = front["members"]
    assert run.read_json("metrics.json")["front_size"] == len(members) >= 1
    assert all(m["costs"]["params"] <= LIMIT for m in members)
    assert sum(m["chosen"] for m in members) == 1 and members[0]["chosen"]  # the pick: best validation
    vals = [m["objectives"]["val_score"] for m in members]
    params = [m["objectives"]["params"] for m in members]
    assert vals == sorted(vals, reverse=True) and params == sorted(params, reverse=True)  # a front: trade-off
    write_report(run.path)
    assert "## Pareto front" in run.file("report.md").read_text() and run.file("pareto.png").stat().st_size > 0
    for strategy in [{"name": "local-search", "budget": 10, "objectives": ["val_score", "params"]},
                     {"name": "table-random", "budget": 10, "objectives": ["val_accuracy", "params"]}]:
        with pytest.raises(ConfigError, match="objectives"):
            pipeline.search({**recipe, "strategy": strategy}, out=tmp_path / "bad")
        assert not (tmp_path / "bad").exists()
