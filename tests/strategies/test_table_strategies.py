"""The table strategies through the pipeline: metrics.json reports the pick's test score."""

import pytest

pytest.importorskip("nas_bench_graph")

from attnas import pipeline  # noqa: E402
from attnas.core.arch import load_arch  # noqa: E402
from attnas.core.errors import ConfigError, UnsupportedError  # noqa: E402
from attnas.spaces.nas_bench_graph import NasBenchGraphSpace  # noqa: E402
from attnas.tasks.nas_bench_graph import NasBenchGraphTask, NasBenchGraphTaskConfig  # noqa: E402


def recipe(strategy, dataset="citeseer", operations="all"):
    return {"name": "nbg-test", "seed": 3, "task": {"name": "nas-bench-graph", "dataset": dataset},
            "space": {"name": "nas-bench-graph", "operations": operations}, "strategy": strategy}


@pytest.mark.parametrize("strategy", [{"name": "table-random", "budget": 30},
                                      {"name": "regularized-evolution", "budget": 30, "population": 10},
                                      {"name": "local-search", "budget": 30},
                                      {"name": "table-evolution", "budget": 30, "rounds": 2}])
def test_search_writes_the_pick_with_its_validation_and_test_score(tmp_path, strategy):
    run = pipeline.search(recipe(strategy), out=tmp_path / "run")
    metrics = run.read_json("metrics.json")
    assert metrics["queries"] == 30
    queries = run.events("query")
    assert len(queries) == 30
    assert metrics["val_score"] == max(e["val_score"] for e in queries)
    space = NasBenchGraphSpace()
    arch = load_arch(run.file("arch.json"), space)
    task = NasBenchGraphTask(NasBenchGraphTaskConfig("citeseer"))
    assert metrics["test_score"] == task.test_score(space.index.codes[space.index_of(arch)])
    assert not run.exists("model.pt")


def test_proteins_runs_on_its_five_operations(tmp_path):
    run = pipeline.search(recipe({"name": "regularized-evolution", "budget": 20}, "proteins", "proteins"),
                          out=tmp_path / "run")
    assert run.read_json("metrics.json")["queries"] == 20
    with pytest.raises(UnsupportedError, match="space.operations: proteins"):
        pipeline.search(recipe({"name": "table-random", "budget": 20}, "proteins"), out=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_bad_options_and_other_tasks_are_refused_before_writing(tmp_path):
    with pytest.raises(ConfigError, match="strategy.budget"):
        pipeline.search(recipe({"name": "table-random", "budget": 0}), out=tmp_path / "a")
    with pytest.raises(UnsupportedError, match="table"):
        pipeline.search({**recipe({"name": "table-random"}), "space": {"name": "enas"}}, out=tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
