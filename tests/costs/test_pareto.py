"""Pareto fronts and NSGA-II selection on synthetic points; objective and constraint names; picking."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("pymoo")

from attnas.core.errors import ConfigError  # noqa: E402
from attnas.costs.pareto import (  # noqa: E402
    check_objectives,
    non_dominated,
    normalize_constraints,
    nsga2_select,
    objective_matrix,
    pick_member,
)


def _dominates(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(a <= b) and np.any(a < b))


def _brute_front(F: np.ndarray) -> list[int]:
    return [i for i in range(len(F)) if not any(_dominates(F[j], F[i]) for j in range(len(F)) if j != i)]


def _brute_ranks(F: np.ndarray) -> list[int]:
    """Non-domination rank of every row: peel the front off, again and again."""
    ranks, left, r = [-1] * len(F), list(range(len(F))), 0
    while left:
        front = [i for i in left if not any(_dominates(F[j], F[i]) for j in left if j != i)]
        for i in front:
            ranks[i] = r
        left = [i for i in left if i not in front]
        r += 1
    return ranks


@pytest.mark.parametrize("seed", range(6))
def test_non_dominated_equals_a_brute_force_check(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 40)), int(rng.integers(2, 5))
    # small integers make ties and duplicate points common
    F = rng.integers(0, 6, size=(n, m)).astype(float) if seed % 2 else rng.normal(size=(n, m))
    assert non_dominated(F) == _brute_front(F)


def test_duplicates_of_a_front_member_all_stay_on_the_front():
    F = np.array([[1.0, 2.0], [1.0, 2.0], [2.0, 1.0], [2.0, 2.0]])
    assert non_dominated(F) == [0, 1, 2]


@pytest.mark.parametrize("seed", range(5))
def test_nsga2_takes_whole_fronts_in_rank_order_then_the_extremes(seed):
    rng = np.random.default_rng(100 + seed)
    F = rng.integers(0, 8, size=(30, 2)).astype(float)
    ranks = _brute_ranks(F)
    for n in (1, 5, 12, 30):
        chosen = nsga2_select(F, n, seed=seed)
        assert len(chosen) == n == len(set(chosen))
        worst = max(ranks[i] for i in chosen)
        # every point of a better rank than the last one taken is taken
        assert {i for i in range(len(F)) if ranks[i] < worst} <= set(chosen)
        assert [ranks[i] for i in chosen] == sorted(ranks[i] for i in chosen)  # best rank first
        split = [i for i in range(len(F)) if ranks[i] == worst]
        taken = [i for i in split if i in chosen]
        if len(taken) >= 2 and len(taken) < len(split):
            # the split front's extremes (infinite crowding distance) survive
            for col in range(F.shape[1]):
                values = F[split, col]
                assert any(F[i, col] == values.min() for i in taken)
                assert any(F[i, col] == values.max() for i in taken)
    assert nsga2_select(F, 12, seed=3) == nsga2_select(F, 12, seed=3)  # seeded: reproducible


def test_objective_matrix_maximises_the_metric_and_minimises_costs():
    F = objective_matrix([{"val_accuracy": 0.9, "params": 10}, {"val_accuracy": 0.8, "params": 5}],
                         ["val_accuracy", "params"])
    assert F.tolist() == [[-0.9, 10.0], [-0.8, 5.0]]


@pytest.mark.parametrize("objectives, constraints, message", [
    (["val_accuracy", "latncy_ms"], None, r"strategy.objectives\[1\]: unknown objective 'latncy_ms' \(did you mean 'latency_ms'\?\)"),
    (["params", "latency_ms"], None, "name the validation metric exactly once"),
    (["val_accuracy", "params", "params"], None, r"strategy.objectives\[2\]: 'params' is listed twice"),
    (None, {"parms": 10}, r"strategy.constraints.parms: unknown cost \(did you mean 'params'\?\)"),
    (None, {"params": 0}, r"strategy.constraints.params: the limit must be a number > 0, got 0"),
    (None, {"params": "lots"}, "the limit must be a number > 0, got 'lots'"),
])
def test_bad_objectives_and_constraints_are_one_line_config_errors(objectives, constraints, message):
    with pytest.raises(ConfigError, match=message) as info:
        check_objectives(objectives, constraints)
    assert "\n" not in str(info.value)


def test_yaml_reads_1e6_as_a_string_and_the_limit_is_still_a_number():
    assert normalize_constraints({"params": "1e6", "latency_ms": 5}) == {"params": 1e6, "latency_ms": 5.0}


def test_recipe_with_an_unknown_objective_fails_when_read(tiny_recipe_data):
    from attnas.config import load_config

    with pytest.raises(ConfigError, match=r"^strategy.objectives\[1\]: unknown objective 'lat'"):
        load_config(tiny_recipe_data, ["strategy.objectives=[val_accuracy, lat]"])
    cfg = load_config(tiny_recipe_data, ["strategy.objectives=[val_accuracy, params]",
                                         "strategy.constraints={params: 1e6}"])
    assert cfg.strategy.options.constraints == {"params": 1e6}
    assert cfg.strategy.options.objectives == ("val_accuracy", "params")


FRONT = {"metric": "val_accuracy", "objectives": ["val_accuracy", "latency_ms"], "members": [
    {"index": 0, "objectives": {"val_accuracy": 0.9, "latency_ms": 9.0}, "costs": {"latency_ms": 9.0, "params": 900}},
    {"index": 1, "objectives": {"val_accuracy": 0.8, "latency_ms": 4.0}, "costs": {"latency_ms": 4.0, "params": 400}},
    {"index": 2, "objectives": {"val_accuracy": 0.7, "latency_ms": 1.0}, "costs": {"latency_ms": 1.0, "params": 100}},
]}


@pytest.mark.parametrize("pick, index", [("0", 0), ("2", 2), ("-1", 2), ("latency_ms<5", 1), ("latency_ms <= 1", 2),
                                         ("params<1000,val_accuracy>0.75", 0), ("params<500, latency_ms>2", 1)])
def test_pick_member(pick, index):
    assert pick_member(FRONT, pick)["index"] == index


@pytest.mark.parametrize("pick, message", [("3", "the front has 3 members"), ("latency_ms<0.5", "no member"),
                                           ("latency<5", "unknown value 'latency'"), ("fast", "expected an index")])
def test_pick_member_refuses(pick, message):
    with pytest.raises(ConfigError, match=message):
        pick_member(FRONT, pick)


def test_brute_force_helpers_agree_with_each_other():
    """The oracle itself: rank 0 is the brute-force front, and ranks cover every point."""
    F = np.array(list(itertools.product(range(3), range(3))), dtype=float)
    ranks = _brute_ranks(F)
    assert [i for i, r in enumerate(ranks) if r == 0] == _brute_front(F) == [0]
    assert max(ranks) == 4
