"""Search loops over a table of measured architectures (NAS-Bench-Graph).

Each loop queries a :class:`~attnas.tasks.nas_bench_graph.ValidationQueries` (validation
performance only) until ``budget`` distinct architectures have been queried; the pick is
the queried architecture with the best validation performance
(:meth:`~attnas.tasks.nas_bench_graph.ValidationQueries.incumbent`). Architectures are
integer indices, so a 100-query search takes a few milliseconds.

Pairing: every loop draws its first architectures with ``rng.randrange`` from the same
``random.Random(seed)`` (:meth:`ValidationQueries.sample_unseen`), so with seed ``k`` the
first architectures of every strategy are the first ones random search draws.

- :func:`random_search`: uniform draws without repetition.
- :func:`regularized_evolution`: Real, Aggarwal, Huang, Le, *Regularized Evolution for
  Image Classifier Architecture Search*, AAAI 2019, Algorithm 1: a population of
  ``population`` random architectures; each cycle samples ``sample_size`` members (with
  replacement), mutates the best of them, adds the child and removes the oldest member.
- :func:`local_search`: White, Zela, Ru, Liu, Hutter, *Exploring the Loss Landscape in
  Neural Architecture Search*, UAI 2021, Algorithm 1: from a random architecture, query
  all its neighbours and move to the best if it improves on the current one; at a local
  optimum restart from a new random architecture.
- :func:`autoattend_evolution`: AutoAttend's search (Guan et al., ICML 2021, Sec. 5.2.3,
  ``one-shot-evolution`` in :mod:`attnas.strategies.one_shot`) scaled to the budget: a
  random population of ``population_fraction`` of the budget, then ``rounds`` rounds in
  which the top ``parents`` of everything queried are mutated into ``children`` new
  architectures (500 + 5 x 100 of 1,000 in the paper; no member ever leaves).

A mutation is a uniform neighbour not queried yet; when all neighbours were queried, a
fresh random architecture keeps the budget moving.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from attnas.tasks.nas_bench_graph import ValidationQueries


def mutate_unseen(queries: ValidationQueries, parent: int, rng: random.Random) -> int:
    """A uniform not-yet-queried neighbour of ``parent``, else a fresh random architecture."""
    fresh = [j for j in queries.neighbours(parent) if not queries.seen(j)]
    return rng.choice(fresh) if fresh else queries.sample_unseen(rng)


def random_search(queries: ValidationQueries, budget: int, rng: random.Random) -> None:
    """Query ``budget`` distinct uniform architectures."""
    while queries.spent < budget:
        queries.query(queries.sample_unseen(rng))


def regularized_evolution(queries: ValidationQueries, budget: int, rng: random.Random, population: int = 20,
                          sample_size: int = 5) -> None:
    """Aging evolution with tournaments of ``sample_size`` (Real et al. 2019, Algorithm 1)."""
    members: list[tuple[int, float]] = []
    while queries.spent < budget and len(members) < population:
        i = queries.sample_unseen(rng)
        members.append((i, queries.query(i)))
    while queries.spent < budget:
        parent = max((rng.choice(members) for _ in range(sample_size)), key=lambda m: m[1])[0]
        child = mutate_unseen(queries, parent, rng)
        members.append((child, queries.query(child)))
        members.pop(0)


def local_search(queries: ValidationQueries, budget: int, rng: random.Random) -> None:
    """Best-improvement local search with random restarts (White et al. 2021, Algorithm 1)."""
    while queries.spent < budget:
        current = queries.sample_unseen(rng)
        score = queries.query(current)
        while queries.spent < budget:
            neighbours = list(queries.neighbours(current))
            rng.shuffle(neighbours)
            best, best_score = current, score
            for j in neighbours:
                if queries.spent >= budget and not queries.seen(j):
                    return
                s = queries.query(j)
                if s > best_score:
                    best, best_score = j, s
            if best == current:  # a local optimum: restart
                break
            current, score = best, best_score


def best_by_validation(queries: ValidationQueries, count: int) -> list[int]:
    """The positions in ``queries.trace`` of the ``count`` best queried architectures on validation."""
    return sorted(range(queries.spent), key=lambda k: -queries.scores[k])[:count]


def autoattend_evolution(queries: ValidationQueries, budget: int, rng: random.Random,
                         population_fraction: float = 0.5, rounds: int = 5,
                         top: Callable[[ValidationQueries, int], list[int]] = best_by_validation) -> None:
    """AutoAttend's evolution scaled to ``budget``: a random population, then ``rounds`` rounds
    in which the top ``children`` architectures are each mutated once (Guan et al. 2021).

    ``top(queries, count)`` ranks the queried architectures (positions in ``queries.trace``,
    best first): by validation, or by NSGA-II's crowded comparison for a Pareto front
    (:func:`attnas.strategies.table_fronts.crowded_top`)."""
    initial = max(1, min(budget, round(budget * population_fraction)))
    while queries.spent < initial:
        queries.query(queries.sample_unseen(rng))
    for r in range(rounds):
        left = budget - queries.spent
        children = -(-left // (rounds - r)) if left > 0 else 0  # spread what is left over the rounds
        if children <= 0:
            break
        parents = [queries.trace[k] for k in top(queries, children)]
        for c in range(children):
            queries.query(mutate_unseen(queries, parents[c % len(parents)], rng))
    while queries.spent < budget:  # rounds: 0 leaves the rest to random draws
        queries.query(queries.sample_unseen(rng))


#: The loops by strategy name (what ``attnas bench`` runs).
LOOPS = {"table-random": random_search, "regularized-evolution": regularized_evolution,
         "local-search": local_search, "table-evolution": autoattend_evolution}
