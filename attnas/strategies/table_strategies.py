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

Costs. Every table strategy takes ``constraints``, upper limits on the table's costs
(``params``: parameters; ``latency_ms``: NAS-Bench-Graph's measured latency in ms), with the
meaning they have elsewhere in attnas (:mod:`attnas.costs.pareto`): the search draws and mutates
among the architectures within every limit only. An architecture over a limit is rejected
without counting as a query (its costs are read from the table without training it, as a
network's parameters are known before it trains); the budget stays the number of distinct
architectures queried. A constraint that fewer than ``budget`` architectures meet is one
error line before anything is written. ``table-random``, ``regularized-evolution`` and
``table-evolution`` also take ``objectives`` (e.g. ``[val_score, params]``): the search keeps a Pareto front
(:mod:`attnas.strategies.table_fronts`) and the run writes ``pareto.json``, which
``attnas report`` draws.

Example recipe::

    task: {name: nas-bench-graph, dataset: cora}
    space: {name: nas-bench-graph}
    strategy: {name: regularized-evolution, budget: 100, population: 20, sample_size: 5,
               constraints: {params: 1.2e6}, objectives: [val_score, params]}
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Annotated, Any, Callable, ClassVar

from attnas.config import CheckedConfig, PositiveFloat, PositiveInt, Range
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError, UnsupportedError
from attnas.costs import pareto
from attnas.registry import register_strategy
from attnas.strategies.base import SearchResult, Strategy
from attnas.strategies.table_fronts import crowded_top, found_front, pareto_regularized_evolution
from attnas.strategies.table_search import LOOPS
from attnas.tasks.nas_bench_graph import TABLE_COSTS, ValidationQueries


def check_table_costs(options: Any) -> None:
    """Check ``constraints`` and ``objectives`` of a table strategy's options: attnas's rules
    (:func:`attnas.costs.pareto.check_objectives`), and only the costs the table holds.

    Raises:
        ConfigError: One line naming the first bad name or limit.
    """
    from attnas.strategies.one_shot_config import check_cost_options

    check_cost_options(options)
    names = [*(options.constraints or {}), *pareto.cost_objectives(getattr(options, "objectives", None))]
    for name in names:
        if name not in TABLE_COSTS:
            raise ConfigError(f"strategy: NAS-Bench-Graph's table holds the costs {', '.join(TABLE_COSTS)}, "
                              f"not {name!r}")


@dataclass(frozen=True)
class ConstrainedConfig(CheckedConfig):
    """Options every table strategy has.

    Attributes:
        budget: Distinct architectures queried.
        constraints: Upper limits on the table's costs, e.g. ``{params: 1.2e6, latency_ms: 4}``:
            only architectures within every limit are queried.
    """

    budget: PositiveInt = 100
    constraints: dict[str, PositiveFloat] | None = None

    field_prefix = "strategy."

    def __post_init__(self) -> None:
        super().__post_init__()
        check_table_costs(self)


@dataclass(frozen=True)
class BudgetConfig(ConstrainedConfig):
    """Options of ``table-random`` (and, without ``objectives``, ``local-search``); the base of
    the evolutions' options.

    Attributes:
        objectives: The validation metric and costs to trade off (e.g. ``[val_score, params]``);
            two or more keep a Pareto front.
    """

    objectives: list[str] | None = None


@dataclass(frozen=True)
class RegularizedEvolutionConfig(BudgetConfig):
    """Options of ``regularized-evolution`` (Real et al., AAAI 2019).

    Attributes:
        population: Members kept (the oldest leaves when a child joins).
        sample_size: Members drawn per tournament (with replacement).
    """

    population: PositiveInt = 20
    sample_size: PositiveInt = 5


@dataclass(frozen=True)
class TableEvolutionConfig(BudgetConfig):
    """Options of ``table-evolution`` (AutoAttend's evolution, Guan et al., ICML 2021).

    Attributes:
        population_fraction: Share of the budget drawn at random first (paper: 500 of 1,000).
        rounds: Mutation rounds sharing the rest (paper: 5).
    """

    population_fraction: Annotated[float, Range(0, 1, low_open=True)] = 0.5
    rounds: Annotated[int, Range(0)] = 5


def multi_objective(options: Any) -> bool:
    """Whether ``options`` name two or more objectives (a Pareto front is kept)."""
    return len(getattr(options, "objectives", None) or ()) >= 2


class _TableStrategy(Strategy):
    """Runs one loop of :data:`~attnas.strategies.table_search.LOOPS` on the task's validation view."""

    requires = ("table",)
    final_training = False
    #: The loop's settings among the options (besides ``budget``).
    settings: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check_task(cls, options: Any, space: Any, task: Any) -> None:
        """Refuse a task without a table, an objective that is not its validation metric, and
        constraints that fewer than ``budget`` architectures of the table meet."""
        if not hasattr(task, "validation_view"):
            raise UnsupportedError(f"strategy '{cls.name}' queries a table of measured architectures; "
                                   f"task '{task.name}' has none (use task 'nas-bench-graph')")
        pareto.check_metric(getattr(options, "objectives", None), task.metric)
        cls.prepare(task.validation_view(space.index.codes, space.index.neighbours), options)

    @classmethod
    def prepare(cls, queries: ValidationQueries, options: Any) -> ValidationQueries:
        """Restrict ``queries`` to the architectures within ``options.constraints``.

        Raises:
            ConfigError: When fewer than ``options.budget`` architectures meet them.
        """
        if options.constraints:
            queries.constrain(options.constraints, options.budget)
        return queries

    @classmethod
    def random_counterpart(cls, options: Any, space: Any, seed: int) -> dict:
        """Random search with the same number of queries."""
        return {"name": "table-random", "budget": options.budget}

    @classmethod
    def run_loop(cls, queries: ValidationQueries, options: Any, seed: int) -> None:
        """Search ``queries`` with ``options`` (seed ``seed``: the paired random draws)."""
        cls.prepare(queries, options)
        kwargs = {k: getattr(options, k) for k in cls.settings}
        loop, extra = cls.front_loop(options) if multi_objective(options) else (LOOPS[cls.name], {})
        loop(queries, options.budget, random.Random(seed), **kwargs, **extra)

    @classmethod
    def front_loop(cls, options: Any) -> tuple[Callable[..., None], dict]:
        """The loop that keeps a Pareto front of ``options.objectives`` and the arguments it adds.

        The plain loop by default: random search and local search draw or walk the same way
        whatever the objectives; the front is read off the queried architectures afterwards.
        """
        return LOOPS[cls.name], {}

    def search(self) -> SearchResult:
        index = self.space.index
        queries = self.task.validation_view(index.codes, index.neighbours)
        self.run_loop(queries, self.options, self.seed)
        for k, (i, score) in enumerate(zip(queries.trace, queries.scores)):
            self.run.log({"phase": "query", "index": k, "val_score": score, "score": score,
                          "costs": queries.costs(i), "arch": self.space.arch_at(i).choices})
        best = queries.incumbent()
        arch = self.space.arch_at(best)
        arch = self.space.arch(arch.choices, strategy=self.name)
        code = index.codes[best]
        metrics = {"val_score": queries.scores[queries.trace.index(best)], "test_score": self.task.test_score(code),
                   "queries": queries.spent, "latency_s": queries.latency[best], "params_m": queries.params[best],
                   "rejected": queries.rejected}
        if multi_objective(self.options):
            metrics["front_size"] = self.write_front(queries, best)
        return SearchResult(arch, metrics)

    def write_front(self, queries: ValidationQueries, best: int) -> int:
        """Write ``pareto.json``: the queried architectures no other queried one dominates, with
        their validation and (for the record, never used to pick) test performance."""
        objectives = self.options.objectives
        metric = f"val_{self.task.metric}"
        members = []
        for i in found_front(queries, objectives):
            values = {metric: queries.scores[queries.trace.index(i)], **queries.costs(i)}
            members.append({"arch": Arch(self.space.name, self.space.arch_at(i).choices).to_dict(),
                            "objectives": {n: values[n] for n in objectives}, "costs": queries.costs(i),
                            "test_score": self.task.test_score(self.space.index.codes[i]), "chosen": i == best})
        context = {"device": "NAS-Bench-Graph's table (its authors' measurements)", "threads": "their",
                   "protocol": {"latency": "table"}, "dataset": self.task.options.dataset, "scores": "table"}
        self.run.write_json(pareto.PARETO_FILE, pareto.front_document(
            members, objectives, self.options.constraints, metric, context))
        return len(members)


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

    @classmethod
    def front_loop(cls, options: Any) -> tuple[Callable[..., None], dict]:
        """Tournaments won by Pareto rank, then crowding (NSGA-II's order)."""
        return pareto_regularized_evolution, {"objectives": options.objectives}


@register_strategy("local-search")
class LocalSearch(_TableStrategy):
    """Best-improvement local search with restarts over a table (White et al., UAI 2021)."""

    name = "local-search"
    Config = ConstrainedConfig


@register_strategy("table-evolution")
class TableEvolution(_TableStrategy):
    """AutoAttend's evolution (random population, top-k mutated per round) over a table."""

    name = "table-evolution"
    Config = TableEvolutionConfig
    settings = ("population_fraction", "rounds")

    @classmethod
    def front_loop(cls, options: Any) -> tuple[Callable[..., None], dict]:
        """The same rounds with the top-k taken by Pareto rank, then crowding."""
        return LOOPS[cls.name], {"top": crowded_top(options.objectives)}
