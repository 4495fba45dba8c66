"""Strategies that search a table of measured architectures (task ``nas-bench-graph``).

``table-random``, ``regularized-evolution``, ``local-search`` and ``table-evolution``
(AutoAttend's scheme) run the loops of :mod:`attnas.strategies.table_search` (and
``table-latent-bo`` that of :mod:`attnas.strategies.table_latent_bo`) on the task's
:class:`~attnas.tasks.nas_bench_graph.ValidationQueries`: they read validation
performance only, and the budget is the number of distinct architectures queried. The
pick is the best queried architecture on validation; its test performance is read from
the table once the search is over and goes to ``metrics.json`` (``test_score``) with its
validation performance (``val_score``). Every query is an event (``phase: query``). A
search takes milliseconds, so a killed run simply searches again (same seed, same pick).

Example recipe::

    task: {name: nas-bench-graph, dataset: cora}
    space: {name: nas-bench-graph}
    strategy: {name: regularized-evolution, budget: 100, population: 20, sample_size: 5}
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from attnas.config import CheckedConfig, PositiveInt, Range
from attnas.core.errors import UnsupportedError
from attnas.registry import register_strategy
from attnas.strategies.base import SearchResult, Strategy
from attnas.strategies.table_search import LOOPS
from attnas.tasks.nas_bench_graph import ValidationQueries


@dataclass(frozen=True)
class BudgetConfig(CheckedConfig):
    """Options of ``table-random`` and ``local-search``.

    Attributes:
        budget: Distinct architectures queried.
    """

    budget: PositiveInt = 100

    field_prefix = "strategy."


@dataclass(frozen=True)
class RegularizedEvolutionConfig(CheckedConfig):
    """Options of ``regularized-evolution`` (Real et al., AAAI 2019).

    Attributes:
        budget: Distinct architectures queried.
        population: Members kept (the oldest leaves when a child joins).
        sample_size: Members drawn per tournament (with replacement).
    """

    budget: PositiveInt = 100
    population: PositiveInt = 20
    sample_size: PositiveInt = 5

    field_prefix = "strategy."


@dataclass(frozen=True)
class TableEvolutionConfig(CheckedConfig):
    """Options of ``table-evolution`` (AutoAttend's evolution, Guan et al., ICML 2021).

    Attributes:
        budget: Distinct architectures queried.
        population_fraction: Share of the budget drawn at random first (paper: 500 of 1,000).
        rounds: Mutation rounds sharing the rest (paper: 5).
    """

    budget: PositiveInt = 100
    population_fraction: Annotated[float, Range(0, 1, low_open=True)] = 0.5
    rounds: Annotated[int, Range(0)] = 5

    field_prefix = "strategy."


class _TableStrategy(Strategy):
    """Runs one loop of :data:`~attnas.strategies.table_search.LOOPS` on the task's validation view."""

    requires = ("table",)
    final_training = False
    #: The loop's settings among the options (besides ``budget``).
    settings: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check_task(cls, options: Any, space: Any, task: Any) -> None:
        if not hasattr(task, "validation_view"):
            raise UnsupportedError(f"strategy '{cls.name}' queries a table of measured architectures; "
                                   f"task '{task.name}' has none (use task 'nas-bench-graph')")

    @classmethod
    def random_counterpart(cls, options: Any, space: Any, seed: int) -> dict:
        """Random search with the same number of queries."""
        return {"name": "table-random", "budget": options.budget}

    @classmethod
    def run_loop(cls, queries: ValidationQueries, options: Any, seed: int) -> None:
        """Search ``queries`` with ``options`` (seed ``seed``: the paired random draws)."""
        kwargs = {k: getattr(options, k) for k in cls.settings}
        LOOPS[cls.name](queries, options.budget, random.Random(seed), **kwargs)

    def search(self) -> SearchResult:
        index = self.space.index
        queries = self.task.validation_view(index.codes, index.neighbours)
        self.run_loop(queries, self.options, self.seed)
        for k, (i, score) in enumerate(zip(queries.trace, queries.scores)):
            self.run.log({"phase": "query", "index": k, "val_score": score, "arch": self.space.arch_at(i).choices})
        best = queries.incumbent()
        arch = self.space.arch_at(best)
        arch = self.space.arch(arch.choices, strategy=self.name)
        code = index.codes[best]
        metrics = {"val_score": queries.scores[queries.trace.index(best)], "test_score": self.task.test_score(code),
                   "queries": queries.spent, "latency_s": queries.latency[best], "params_m": queries.params[best]}
        return SearchResult(arch, metrics)


@register_strategy("table-random")
class TableRandom(_TableStrategy):
    """Random search over a table: uniform distinct architectures."""

    name = "table-random"
    Config = BudgetConfig

    @classmethod
    def random_counterpart(cls, options: Any, space: Any, seed: int) -> None:
        """Random search is its own counterpart."""
        return None


@register_strategy("regularized-evolution")
class RegularizedEvolution(_TableStrategy):
    """Regularized (aging) evolution with tournaments over a table (Real et al., AAAI 2019)."""

    name = "regularized-evolution"
    Config = RegularizedEvolutionConfig
    settings = ("population", "sample_size")


@register_strategy("local-search")
class LocalSearch(_TableStrategy):
    """Best-improvement local search with restarts over a table (White et al., UAI 2021)."""

    name = "local-search"
    Config = BudgetConfig


@register_strategy("table-evolution")
class TableEvolution(_TableStrategy):
    """AutoAttend's evolution (random population, top-k mutated per round) over a table."""

    name = "table-evolution"
    Config = TableEvolutionConfig
    settings = ("population_fraction", "rounds")
