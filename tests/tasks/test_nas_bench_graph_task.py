"""The NAS-Bench-Graph task: safe tables, validation-only views, test for the pick."""

import dataclasses
import gc
import importlib.util
import os
import pickle
import random
import types

import numpy as np
import pytest

pytest.importorskip("nas_bench_graph")

from attnas.core.errors import ConfigError, DataError, UnsupportedError  # noqa: E402
from attnas.data import nas_bench_graph as tables  # noqa: E402
from attnas.spaces.nas_bench_graph import NasBenchGraphConfig, NasBenchGraphSpace  # noqa: E402
from attnas.tasks.nas_bench_graph import NasBenchGraphTask, NasBenchGraphTaskConfig  # noqa: E402
from nas_bench_graph_tables import cora_space, cora_task  # noqa: E402


@pytest.fixture(scope="module")
def space():
    return cora_space()


@pytest.fixture(scope="module")
def task():
    return cora_task()


def test_tables_have_every_architecture_and_both_columns():
    t = tables.load_table("citeseer")
    assert len(t.codes) == 26_206 and np.all(np.diff(t.codes) > 0)
    assert 0.3 < t.valid.mean() < 1 and 0.3 < t.test.mean() < 1
    assert not np.array_equal(t.valid, t.test)
    assert len(tables.load_table("proteins").codes) == 2_021


def test_a_table_that_names_other_code_is_refused(tmp_path, monkeypatch):
    class Evil:
        def __reduce__(self):
            return (os.getcwd, ())  # (not print: Ray, imported by other tests of the worker, replaces it)

    (tmp_path / "cora.bench").write_bytes(pickle.dumps({1: Evil()}))
    monkeypatch.setattr(tables, "tables_folder", lambda: tmp_path)
    tables.load_table.cache_clear()
    try:
        with pytest.raises(DataError, match=r"refusing to load \S*getcwd"):
            tables.load_table("cora")
    finally:
        tables.load_table.cache_clear()


def test_missing_package_is_one_line_with_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nas_bench_graph" else real(name, *a))
    with pytest.raises(DataError, match=r'pip install "attnas\[nasbench\]"'):
        tables.tables_folder()


def test_unknown_dataset_names_the_choices():
    with pytest.raises(ConfigError, match="cora"):
        NasBenchGraphTaskConfig("corra")


def test_proteins_needs_the_proteins_operations():
    task = NasBenchGraphTask(NasBenchGraphTaskConfig("proteins"))
    with pytest.raises(UnsupportedError, match="space.operations: proteins"):
        NasBenchGraphSpace().check_task(task)
    NasBenchGraphSpace(NasBenchGraphConfig(operations="proteins")).check_task(task)


def test_the_view_answers_validation_and_counts_distinct_queries(space, task):
    q = task.validation_view(space.index.codes, space.index.neighbours)
    i = space.index.index([0, 1, 2, 3], ["gcn", "gat", "sage", "gin"])
    code = space.index.codes[i]
    raw = tables.load_table("cora")
    row = int(np.searchsorted(raw.codes, code))
    assert q.query(i) == raw.valid[row]
    q.query(i)
    assert q.spent == 1 and q.trace == [i]
    assert task.test_score(code) == raw.test[row]


_CODE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType)


def _reachable(root, limit=500_000):
    """Every object reachable from ``root`` through its data (a breadth-first walk that does
    not enter classes, modules or functions: code anyone can import)."""
    seen, todo = {id(root): root}, [root]
    while todo and len(seen) < limit:
        obj = todo.pop()
        refs = [obj.__self__] if isinstance(obj, types.MethodType) else gc.get_referents(obj)
        for ref in refs:
            if id(ref) not in seen and not isinstance(ref, _CODE):
                seen[id(ref)] = ref
                todo.append(ref)
    return seen


@pytest.mark.parametrize("constrained", [False, True])
def test_a_search_cannot_reach_the_test_column(space, task, constrained):
    """Nothing reachable from the view a strategy gets holds test performance: not the task,
    not the table, not an array or list of test values (nor through the costs, the
    constraints' mask or the constrained neighbours)."""
    q = task.validation_view(space.index.codes, space.index.neighbours)
    from attnas.strategies.table_search import LOOPS

    if constrained:
        q.constrain({"params": 1.2e6, "latency_ms": 5.0}, 200)
        q.costs(3)
    for loop in LOOPS.values():
        loop(q, q.spent + 30, random.Random(0))
    table = tables.load_table("cora")
    test_list = task.test_column(space.index.codes).tolist()
    reachable = _reachable(q).values()
    assert len(reachable) > 26_206  # the walk went through the view's columns and the index
    for obj in reachable:
        assert obj is not task and obj is not table and obj is not table.test
        if isinstance(obj, list) and len(obj) == len(space.index):
            assert obj != test_list


@pytest.mark.parametrize("name, costs", [
    ("table-random", {}), ("regularized-evolution", {}), ("local-search", {}), ("table-evolution", {}),
    ("local-search", {"constraints": {"params": 1.2e6}}),
    ("regularized-evolution", {"constraints": {"latency_ms": 5}, "objectives": ["val_score", "params"]}),
    ("table-evolution", {"objectives": ["val_score", "latency_ms"]}),
])
def test_searches_do_not_change_when_the_test_column_does(space, name, costs):
    """A strategy that read test performance would query other architectures once the test
    column is shuffled; every strategy's queries stay the same (also under constraints and
    with a Pareto front)."""
    from attnas import registry

    if "objectives" in costs:
        pytest.importorskip("pymoo")
    cls = registry.get("strategy", name)
    options = cls.Config(budget=60, **costs)
    honest = NasBenchGraphTask(NasBenchGraphTaskConfig("cora"))
    shuffled = NasBenchGraphTask(NasBenchGraphTaskConfig("cora"))
    t = shuffled._table
    shuffled._table = dataclasses.replace(t, test=np.random.default_rng(0).permutation(t.test))
    traces = []
    for task in (honest, shuffled):
        q = task.validation_view(space.index.codes, space.index.neighbours)
        cls.run_loop(q, options, seed=3)
        traces.append(q.trace)
    assert traces[0] == traces[1] and len(traces[0]) == 60
