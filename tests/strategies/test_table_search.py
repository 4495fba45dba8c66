"""The table search loops: budgets, paired draws, the algorithms' moves, speed."""

import random
import time

import pytest

pytest.importorskip("nas_bench_graph")

from attnas.strategies import table_search  # noqa: E402
from attnas.strategies.table_search import LOOPS  # noqa: E402
from nas_bench_graph_tables import cora_space, cora_task  # noqa: E402


@pytest.fixture(scope="module")
def space():
    return cora_space()


@pytest.fixture(scope="module")
def task():
    return cora_task()


def view(space, task):
    return task.validation_view(space.index.codes, space.index.neighbours)


@pytest.mark.parametrize("name", sorted(LOOPS))
@pytest.mark.parametrize("budget", [1, 7, 60])
def test_every_loop_spends_exactly_its_budget_on_distinct_architectures(space, task, name, budget):
    q = view(space, task)
    LOOPS[name](q, budget, random.Random(5))
    assert q.spent == budget == len(set(q.trace))
    assert q.scores[q.trace.index(q.incumbent())] == max(q.scores)


def test_seed_k_gives_every_loop_the_same_first_draws(space, task):
    """Paired: random search's first draws are evolution's population and local search's start."""
    traces = {}
    for name, loop in LOOPS.items():
        q = view(space, task)
        loop(q, 40, random.Random(11))
        traces[name] = q.trace
    rs = traces["table-random"]
    assert traces["regularized-evolution"][:20] == rs[:20]
    assert traces["table-evolution"][:20] == rs[:20]
    assert traces["local-search"][0] == rs[0]
    again = view(space, task)
    LOOPS["regularized-evolution"](again, 40, random.Random(11))
    assert again.trace == traces["regularized-evolution"]
    other = view(space, task)
    LOOPS["table-random"](other, 40, random.Random(12))
    assert other.trace != rs


def test_regularized_evolution_children_are_neighbours_of_tournament_winners(space, task):
    q = view(space, task)
    table_search.regularized_evolution(q, 80, random.Random(0), population=10, sample_size=3)
    neighbours_of_earlier = 0
    for k in range(10, 80):
        child = q.trace[k]
        if any(child in space.index.neighbours(p) for p in q.trace[max(0, k - 10):k]):
            neighbours_of_earlier += 1
    assert neighbours_of_earlier >= 65  # the rest: a fresh draw when a winner's neighbours were all queried


def test_local_search_climbs_to_a_local_optimum_then_restarts(space, task):
    q = view(space, task)
    table_search.local_search(q, 400, random.Random(2))
    valid = dict(zip(q.trace, q.scores))
    start = q.trace[0]
    # the first neighbourhood is queried in full right after the start
    first = set(space.index.neighbours(start))
    assert set(q.trace[1:1 + len(first)]) == first
    # some queried architecture is a local optimum: all its neighbours queried, none better
    optima = [i for i in valid if all(j in valid and valid[j] <= valid[i] for j in space.index.neighbours(i))]
    assert optima


def test_autoattend_evolution_mutates_the_top_of_everything_queried(space, task):
    q = view(space, task)
    table_search.autoattend_evolution(q, 100, random.Random(4), population_fraction=0.5, rounds=5)
    initial = dict(zip(q.trace[:50], q.scores[:50]))
    top = sorted(initial, key=lambda i: -initial[i])[:10]
    round_one = q.trace[50:60]
    from_top = sum(any(c in space.index.neighbours(p) for p in top) for c in round_one)
    assert from_top >= 8


def test_a_100_query_search_takes_milliseconds(space, task):
    for name, loop in LOOPS.items():
        for s in range(3):  # fill the neighbour memo as the bench's first searches do
            loop(view(space, task), 100, random.Random(s))
        t0 = time.perf_counter()
        for s in range(20):
            loop(view(space, task), 100, random.Random(100 + s))
        per_search = (time.perf_counter() - t0) / 20
        assert per_search < 0.05, f"{name}: {per_search * 1000:.1f} ms per 100-query search"
