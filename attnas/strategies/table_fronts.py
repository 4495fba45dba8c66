"""Multi-objective search over a table: validation performance against the table's costs.

With ``strategy.objectives`` naming the validation metric and one or more costs (e.g.
``[val_score, params]``), ``table-random``, ``table-evolution`` and ``regularized-evolution`` keep the Pareto
front of the architectures they queried instead of one pick:

- ``table-random`` draws as without objectives (its front is that of its draws).
- ``table-evolution`` (AutoAttend's evolution) mutates, each round, the first ``children``
  of everything queried in NSGA-II's order (:func:`crowded_top`: non-dominated rank, then
  crowding distance) instead of the best ``children`` on validation.
- ``regularized-evolution`` becomes :func:`pareto_regularized_evolution`: Real et al.'s
  aging evolution (AAAI 2019, Algorithm 1) whose tournament is won by NSGA-II's
  crowded-comparison operator (Deb, Pratap, Agarwal, Meyarivan, *A Fast and Elitist
  Multiobjective Genetic Algorithm: NSGA-II*, IEEE Trans. Evolutionary Computation 2002,
  Sec. III-B): the member of lower non-dominated rank within the population, and on equal
  rank the one of larger crowding distance (pymoo's ``RankAndCrowding``,
  :func:`attnas.costs.pareto.nsga2_select`).

Objectives are minimised as in :func:`attnas.costs.pareto.objective_matrix` (the validation
metric negated). :func:`hypervolume` measures a front (pymoo's exact indicator) in the
table's normalised objective box, so a found front is compared with the table's true
front (:func:`true_front`) as the fraction of its hypervolume it covers (Zitzler & Thiele,
*Multiobjective Evolutionary Algorithms: A Comparative Case Study and the Strength Pareto
Approach*, IEEE TEC 1999: the "size of the space covered").
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np

from attnas.costs import pareto
from attnas.strategies.table_search import mutate_unseen
from attnas.tasks.nas_bench_graph import ValidationQueries


def cost_matrix(queries: ValidationQueries, objectives: Sequence[str]) -> np.ndarray:
    """The costs among ``objectives`` of every architecture, ``(n, number of costs)``."""
    costs = pareto.cost_objectives(objectives)
    return np.stack([queries.cost_column(c) for c in costs], axis=1) if costs else np.zeros((queries.n, 0))


def queried_matrix(queries: ValidationQueries, objectives: Sequence[str], positions: Sequence[int],
                   costs: np.ndarray) -> np.ndarray:
    """The objectives to minimise of the queried architectures ``queries.trace[p]`` for ``p``
    in ``positions`` (columns in ``objectives`` order)."""
    cost_names = pareto.cost_objectives(objectives)
    rows = []
    for p in positions:
        i = queries.trace[p]
        rows.append([-queries.scores[p] if pareto.is_metric(n) else costs[i, cost_names.index(n)]
                     for n in objectives])
    return np.asarray(rows, dtype=float).reshape(len(rows), len(objectives))


def found_front(queries: ValidationQueries, objectives: Sequence[str]) -> list[int]:
    """The queried architectures (indices) that no other queried one dominates, in query order."""
    costs = cost_matrix(queries, objectives)
    F = queried_matrix(queries, objectives, range(queries.spent), costs)
    return [queries.trace[p] for p in pareto.non_dominated(F)]


def crowded_top(objectives: Sequence[str]) -> Callable[[ValidationQueries, int], list[int]]:
    """A ranking for :func:`~attnas.strategies.table_search.autoattend_evolution`: the positions of
    the ``count`` queried architectures that NSGA-II keeps (:func:`attnas.costs.pareto.nsga2_select`,
    ties in crowding broken by the query count, so a search is reproducible)."""
    costs: list[np.ndarray] = []

    def top(queries: ValidationQueries, count: int) -> list[int]:
        if not costs:
            costs.append(cost_matrix(queries, objectives))
        F = queried_matrix(queries, objectives, range(queries.spent), costs[0])
        return pareto.nsga2_select(F, count, seed=queries.spent)

    return top


def pareto_regularized_evolution(queries: ValidationQueries, budget: int, rng: random.Random,
                                 objectives: Sequence[str], population: int = 20, sample_size: int = 5) -> None:
    """Aging evolution whose tournaments NSGA-II's crowded comparison decides (see the module)."""
    costs = cost_matrix(queries, objectives)
    members: list[int] = []  # positions in queries.trace
    while queries.spent < budget and len(members) < population:
        queries.query(queries.sample_unseen(rng))
        members.append(queries.spent - 1)
    while queries.spent < budget:
        F = queried_matrix(queries, objectives, members, costs)
        order = pareto.nsga2_select(F, len(members), seed=rng.randrange(2 ** 31))
        rank = {m: r for r, m in enumerate(order)}  # crowded-comparison order: lower is better
        winner = min((rng.randrange(len(members)) for _ in range(sample_size)), key=rank.__getitem__)
        child = mutate_unseen(queries, queries.trace[members[winner]], rng)
        queries.query(child)
        members.append(queries.spent - 1)
        members.pop(0)


def normalised(F: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``F`` scaled so that the table's best value of each objective is 0 and its worst 1."""
    return (F - low) / np.where(high > low, high - low, 1.0)


def hypervolume(F: np.ndarray, reference: Sequence[float]) -> float:
    """The hypervolume (minimisation) that the points ``F`` dominate up to ``reference``
    (pymoo's exact indicator; points beyond the reference add nothing)."""
    from pymoo.indicators.hv import HV

    F = np.asarray(F, dtype=float)
    if len(F) == 0:
        return 0.0
    return float(HV(ref_point=np.asarray(reference, dtype=float))(F))


def table_objectives(valid: np.ndarray, queries: ValidationQueries, objectives: Sequence[str]) -> np.ndarray:
    """The objectives to minimise of every architecture, from a validation column read
    outside any search (for measuring fronts, never for searching)."""
    costs = cost_matrix(queries, objectives)
    cost_names = pareto.cost_objectives(objectives)
    cols = [-valid if pareto.is_metric(n) else costs[:, cost_names.index(n)] for n in objectives]
    return np.stack(cols, axis=1)


def true_front(table_F: np.ndarray, feasible: np.ndarray) -> list[int]:
    """The feasible architectures that no other feasible one dominates."""
    idx = np.flatnonzero(feasible)
    return [int(idx[k]) for k in pareto.non_dominated(table_F[idx])]


class FrontMeter:
    """Measures found fronts against the true front of the feasible table.

    Both are measured in the feasible table's normalised box (each objective's best value 0,
    its worst 1) with the reference point (1, ..., 1); a found front scores the fraction of
    the true front's hypervolume it covers (1: it is the true front, or dominates as much).

    Args:
        table_F: The objectives to minimise of every architecture (:func:`table_objectives`).
        feasible: Which architectures meet the constraints.
    """

    def __init__(self, table_F: np.ndarray, feasible: np.ndarray):
        box = table_F[feasible]
        self.table_F, self.low, self.high = table_F, box.min(axis=0), box.max(axis=0)
        self.reference = np.ones(table_F.shape[1])
        self.front = true_front(table_F, feasible)
        self.true_volume = self.volume(self.front)

    def volume(self, found: Sequence[int]) -> float:
        """The normalised hypervolume of the architectures ``found``."""
        return hypervolume(normalised(self.table_F[list(found)], self.low, self.high), self.reference)

    def ratio(self, found: Sequence[int]) -> float:
        """The hypervolume of ``found`` over that of the true front."""
        return self.volume(found) / self.true_volume if self.true_volume > 0 else 1.0
