"""Pareto fronts over a table: hypervolume, non-dominated fronts, the crowded tournament."""

import random

import numpy as np
import pytest

pytest.importorskip("nas_bench_graph")
pytest.importorskip("pymoo")

from attnas.costs import pareto  # noqa: E402
from attnas.strategies.table_fronts import (FrontMeter, cost_matrix, crowded_top, found_front,  # noqa: E402
                                            hypervolume, pareto_regularized_evolution, queried_matrix,
                                            table_objectives)
from attnas.strategies.table_search import autoattend_evolution, random_search  # noqa: E402
from attnas.strategies.table_strategies import TableEvolution, TableEvolutionConfig  # noqa: E402
from nas_bench_graph_tables import cora_space, cora_task  # noqa: E402

OBJECTIVES = ("val_score", "params")


@pytest.fixture(scope="module")
def table():
    """The nine-operation space and cora's table."""
    return cora_space(), cora_task()


def view(space, task):
    return task.validation_view(space.index.codes, space.index.neighbours)


def test_hypervolume_of_a_hand_computed_example():
    """Points (0.2, 0.6) and (0.5, 0.3) under reference (1, 1): 0.8 x 0.4 + 0.5 x 0.3 = 0.47;
    a dominated point and one beyond the reference add nothing."""
    F = np.array([[0.2, 0.6], [0.5, 0.3]])
    assert hypervolume(F, [1, 1]) == pytest.approx(0.47)
    assert hypervolume(np.vstack([F, [[0.6, 0.7], [1.2, 0.1]]]), [1, 1]) == pytest.approx(0.47)
    assert hypervolume(np.zeros((0, 2)), [1, 1]) == 0.0


def test_found_front_is_the_non_dominated_queried_set(table):
    space, task = table
    q = view(space, task)
    random_search(q, 80, random.Random(1))
    front = found_front(q, OBJECTIVES)
    cost = dict(zip(q.trace, (q.costs(i)["params"] for i in q.trace)))
    val = dict(zip(q.trace, q.scores))
    assert front and set(front) <= set(q.trace)
    for i in front:  # nothing queried dominates a member
        assert not any(val[j] >= val[i] and cost[j] <= cost[i] and (val[j] > val[i] or cost[j] < cost[i])
                       for j in q.trace)
    for j in set(q.trace) - set(front):  # every other queried one is dominated by a member
        assert any(val[i] >= val[j] and cost[i] <= cost[j] and (val[i] > val[j] or cost[i] < cost[j])
                   for i in front)


def test_the_true_front_covers_everything_and_random_search_less(table):
    space, task = table
    q = view(space, task)
    random_search(q, 50, random.Random(2))
    table_F = table_objectives(task.validation_column(space.index.codes), q, OBJECTIVES)
    meter = FrontMeter(table_F, q.feasible)
    assert meter.ratio(meter.front) == pytest.approx(1.0)
    assert meter.ratio(list(range(len(space.index)))) == pytest.approx(1.0)
    assert 0 < meter.ratio(found_front(q, OBJECTIVES)) < 1


def test_pareto_evolution_spends_its_budget_from_random_searchs_draws(table):
    space, task = table
    q = view(space, task)
    pareto_regularized_evolution(q, 45, random.Random(3), OBJECTIVES, population=10, sample_size=3)
    assert q.spent == 45 == len(set(q.trace))
    rs = view(space, task)
    random_search(rs, 10, random.Random(3))
    assert q.trace[:10] == rs.trace


def test_pareto_autoattend_evolution_mutates_the_crowded_top(table):
    """With objectives, a round's parents are NSGA-II's first of everything queried: the first
    20 of 40 queries are random search's; the next 10 are neighbours of 10 of them, among which
    the whole non-dominated front of the 20 (not only the best on validation)."""
    space, task = table
    q = view(space, task)
    top = crowded_top(OBJECTIVES)
    autoattend_evolution(q, 40, random.Random(5), population_fraction=0.5, rounds=2, top=top)
    assert q.spent == 40 == len(set(q.trace))
    first = view(space, task)
    random_search(first, 20, random.Random(5))
    assert q.trace[:20] == first.trace
    parents = {first.trace[k] for k in top(first, 10)}
    front = pareto.non_dominated(queried_matrix(first, OBJECTIVES, range(20), cost_matrix(first, OBJECTIVES)))
    assert {first.trace[k] for k in front} <= parents and len(parents) == 10
    assert all(any(c in space.index.neighbours(p) for p in parents) for c in q.trace[20:30])
    again = view(space, task)
    TableEvolution.run_loop(again, TableEvolutionConfig(budget=40, population_fraction=0.5, rounds=2,
                                                        objectives=list(OBJECTIVES)), 5)
    assert again.trace == q.trace
