"""NAS-Bench-Graph as a task: an architecture is answered with its table entry.

Qin et al., *NAS-Bench-Graph: Benchmarking Graph Neural Architecture Search*, NeurIPS 2022
Datasets and Benchmarks: every architecture of the space (:mod:`attnas.spaces.nas_bench_graph`)
was trained on nine datasets; the table holds its validation and test performance
(accuracy; ROC-AUC on ``proteins``), latency and parameters (:mod:`attnas.data.nas_bench_graph`).

A search sees the table only through :meth:`NasBenchGraphTask.validation_view`, a
:class:`ValidationQueries` that holds the validation column and the costs, never the test
column, and counts the distinct architectures queried (the budget). Its
:meth:`~ValidationQueries.costs` are the table's latency and parameters in attnas's cost
names (:data:`attnas.costs.config.COSTS`): ``params`` (the table's ``para`` is in millions) and
``latency_ms`` (the table's ``latency`` is in seconds: the forward time NAS-Bench-Graph
measured, not one measured here). :meth:`~ValidationQueries.constrain` restricts the view to
the architectures within upper limits on those costs (``strategy.constraints``). The test performance
of the architecture a search picked on validation is read afterwards with
:meth:`NasBenchGraphTask.test_score`. No network is trained, so :meth:`batches`,
:meth:`loss` and :meth:`evaluate` refuse.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnas.config import CheckedConfig
from attnas.core.errors import ConfigError, UnsupportedError, unknown_name
from attnas.data.nas_bench_graph import DATASETS, BenchTable, load_table
from attnas.registry import register_task
from attnas.tasks.base import TaskInfo
from attnas.tasks.measured_scores import MeasuredScoresTask


#: The costs the table holds, in attnas's names, with the factor from the table's units.
TABLE_COSTS = {"params": 1e6, "latency_ms": 1e3}


class ValidationQueries:
    """What a search may read: validation performance and costs, one architecture at a time.

    Costs are known without a query (the table measured them; a network's parameters and
    latency do not need it trained), so reading them spends nothing. Under
    :meth:`constrain`, the draws (:meth:`sample_unseen`) and :attr:`neighbours` skip the
    architectures over a limit: such an architecture is rejected without counting as a
    query (:attr:`rejected` counts the draws rejected), and querying one is an error.

    Args:
        valid: Validation performance by architecture index.
        latency: Latency (seconds) by index.
        params: Parameters (millions) by index.
        neighbours: The space's one-step neighbours of an index.

    Attributes:
        trace: The distinct indices queried, in order (``len(trace)`` is the budget spent).
        scores: Their validation performance, in the same order.
        feasible: Whether each index meets the constraints (all ``True`` without any).
        rejected: Draws rejected for being over a constraint.
    """

    def __init__(self, valid: list[float], latency: list[float], params: list[float],
                 neighbours: Callable[[int], list[int]]):
        self._valid, self.latency, self.params = valid, latency, params
        self._all_neighbours = self.neighbours = neighbours
        self.n = len(valid)
        self.trace: list[int] = []
        self.scores: list[float] = []
        self._seen: set[int] = set()
        self.feasible = np.ones(self.n, dtype=bool)
        self.constraints: dict[str, float] = {}
        self.rejected = 0

    @property
    def spent(self) -> int:
        """Distinct architectures queried so far."""
        return len(self.trace)

    def seen(self, i: int) -> bool:
        """Whether ``i`` was queried already (querying it again is free)."""
        return i in self._seen

    def cost_column(self, name: str) -> np.ndarray:
        """One cost of every architecture, in attnas's units (see :data:`TABLE_COSTS`).

        Raises:
            ConfigError: When the table has no such cost.
        """
        if name not in TABLE_COSTS:
            raise ConfigError(f"strategy: NAS-Bench-Graph's table holds the costs {', '.join(TABLE_COSTS)}, "
                              f"not {name!r}")
        raw = self.params if name == "params" else self.latency
        column = np.asarray(raw, dtype=float) * TABLE_COSTS[name]
        return np.round(column) if name == "params" else column  # whole parameters, as costs() gives

    def costs(self, i: int) -> dict[str, float]:
        """The costs of architecture ``i`` (``params``, ``latency_ms``); reading them spends nothing."""
        return {"params": round(self.params[i] * TABLE_COSTS["params"]),
                "latency_ms": self.latency[i] * TABLE_COSTS["latency_ms"]}

    def constrain(self, constraints: dict[str, float], budget: int) -> None:
        """Search only the architectures with every cost at most its limit.

        Args:
            constraints: ``{cost name: upper limit}`` (:func:`attnas.costs.pareto.normalize_constraints`).
            budget: The queries the search will spend (that many must be feasible).

        Raises:
            ConfigError: One line when fewer than ``budget`` architectures (or none) meet them.
        """
        feasible = np.ones(self.n, dtype=bool)
        for name, limit in constraints.items():
            feasible &= self.cost_column(name) <= limit
        count = int(feasible.sum())
        if count < budget:
            lowest = ", ".join(f"{k} >= {self.cost_column(k).min():g}" for k in constraints)
            raise ConfigError(f"strategy.constraints: {count} of the table's {self.n} architectures meet "
                              f"{', '.join(f'{k} <= {v:g}' for k, v in constraints.items())}, fewer than "
                              f"strategy.budget {budget} (the table has {lowest})")
        self.feasible, self.constraints = feasible, dict(constraints)
        if not feasible.all():
            raw = self._all_neighbours
            self.neighbours = lambda i: [j for j in raw(i) if feasible[j]]

    def query(self, i: int) -> float:
        """The validation performance of architecture ``i`` (a first query spends one unit).

        Raises:
            ValueError: When ``i`` is over a constraint (a search must not query it).
        """
        if not self.feasible[i]:
            raise ValueError(f"architecture {i} is over the constraints {self.constraints}")
        if i not in self._seen:
            self._seen.add(i)
            self.trace.append(i)
            self.scores.append(self._valid[i])
        return self._valid[i]

    def sample(self, rng: random.Random) -> int:
        """A uniform index (queried or not)."""
        return rng.randrange(self.n)

    def sample_unseen(self, rng: random.Random) -> int:
        """A uniform feasible index not queried yet (draws until one is new and feasible;
        the same draws as without constraints, so searches under one constraint stay paired)."""
        while True:
            i = rng.randrange(self.n)
            if i in self._seen:
                continue
            if self.feasible[i]:
                return i
            self.rejected += 1

    def incumbent(self) -> int:
        """The queried index with the best validation performance (the earliest on ties)."""
        return self.trace[max(range(len(self.scores)), key=self.scores.__getitem__)]


@dataclass(frozen=True)
class NasBenchGraphTaskConfig(CheckedConfig):
    """Options of the NAS-Bench-Graph task.

    Attributes:
        dataset: One of the benchmark's nine datasets (``cora`` ... ``proteins``).
    """

    dataset: str = "cora"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dataset not in DATASETS:
            raise ConfigError(f"task.dataset: {unknown_name('NAS-Bench-Graph dataset', self.dataset, DATASETS)}")


@register_task("nas-bench-graph")
class NasBenchGraphTask(MeasuredScoresTask):
    """NAS-Bench-Graph's table of one dataset: validation for search, test for the pick."""

    name = "nas-bench-graph"
    Config = NasBenchGraphTaskConfig
    metric = "score"
    holds = "answers architectures from a table"
    instead = "use a strategy that queries tables, e.g. 'regularized-evolution'"

    def __init__(self, options: NasBenchGraphTaskConfig | None = None, data_root: Path | None = None):
        super().__init__(options, data_root)
        self._table: BenchTable = load_table(self.options.dataset)
        self._columns: dict[tuple, tuple[list, list, list]] = {}

    @property
    def info(self) -> TaskInfo:
        return TaskInfo(kind="table", in_dim=0, num_classes=1,
                        extra={"dataset": self.options.dataset, "architectures": len(self._table.codes)})

    def rows(self, codes: list[int]) -> np.ndarray:
        """The table rows of architecture codes, in order.

        Raises:
            UnsupportedError: When a code is not in this dataset's table.
        """
        codes_arr = np.asarray(codes, dtype=np.int64)
        rows = np.searchsorted(self._table.codes, codes_arr)
        rows = np.minimum(rows, len(self._table.codes) - 1)
        missing = codes_arr[self._table.codes[rows] != codes_arr]
        if len(missing):
            raise UnsupportedError(f"task.dataset '{self.options.dataset}': {len(missing)} architectures of the space "
                                   f"are not in its table (e.g. code {int(missing[0])}); proteins was measured on "
                                   f"5 operations only: use space.operations: proteins")
        return rows

    def validation_view(self, codes: list[int], neighbours: Callable[[int], list[int]]) -> ValidationQueries:
        """A fresh :class:`ValidationQueries` over the architectures ``codes`` (a space's index order)."""
        key = tuple(codes)
        if key not in self._columns:  # aligned once per space: a view is made per search
            rows, t = self.rows(codes), self._table
            self._columns[key] = (t.valid[rows].tolist(), t.latency[rows].tolist(), t.params[rows].tolist())
        return ValidationQueries(*self._columns[key], neighbours)

    def test_score(self, code: int) -> float:
        """The test performance of one architecture (report it for the pick, never search on it)."""
        return float(self._table.test[self.rows([code])[0]])

    def validation_column(self, codes: list[int]) -> np.ndarray:
        """The validation performance of architectures ``codes`` (for measuring found fronts
        against the table's true front after a search, never for a search)."""
        return self._table.valid[self.rows(codes)]

    def test_column(self, codes: list[int]) -> np.ndarray:
        """The test performance of architectures ``codes`` (for reports: curves of picks)."""
        return self._table.test[self.rows(codes)]
