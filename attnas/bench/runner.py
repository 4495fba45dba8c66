"""Running the table strategies many times: cells of strategy x dataset x budget x seeds.

A *cell* is one strategy (with its settings) on one NAS-Bench-Graph dataset at one
budget, searched once per seed ``0..seeds-1`` (seed ``k`` gives every strategy the same
first random draws: the comparisons are paired). For each seed a cell keeps the
validation and test performance of the pick (the best queried architecture on
validation) and the test performance of the incumbent after every query (the anytime
curve). The test column is read here, after each search, never by the search. With
``objectives`` (two or more) a cell also keeps, per seed, the hypervolume of the found
front as a fraction of the table's true front's (:class:`~attnas.strategies.table_fronts.FrontMeter`;
both on validation) and, for the record, the mean test performance of its members. Each
finished cell is written to ``cells/<dataset>/<label>-<budget>.json`` at once, so a killed
bench resumes with the cells it finished.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from attnas import registry
from attnas.config import from_mapping
from attnas.core.errors import ConfigError, unknown_name
from attnas.runs.atomic_files import atomic_write_text
from attnas.spaces.nas_bench_graph import NasBenchGraphConfig, NasBenchGraphSpace
from attnas.tasks.nas_bench_graph import NasBenchGraphTask, NasBenchGraphTaskConfig

DEFAULT_STRATEGIES = ("table-random", "regularized-evolution", "local-search", "table-evolution")
DEFAULT_BUDGETS = (25, 50, 100, 200, 500)


@dataclass(frozen=True)
class StrategySpec:
    """A strategy with settings, as written on the command line: ``name`` or
    ``name:key=value,key=value`` (e.g. ``table-evolution:population_fraction=0.25``).

    Attributes:
        label: The text as given (the row's name in the results).
        name: The registered strategy.
        settings: Its options besides ``budget``.
    """

    label: str
    name: str
    settings: dict

    @classmethod
    def parse(cls, text: str) -> StrategySpec:
        """Parse and check a specification.

        Raises:
            ConfigError: An unknown strategy, a malformed or unknown setting, a bad value.
        """
        name, _, rest = text.partition(":")
        names = table_strategies()
        if name not in names:
            raise ConfigError(f"--strategy: {unknown_name('table strategy', name, names)}")
        settings = {}
        for item in filter(None, rest.split(",")):
            key, eq, value = item.partition("=")
            if not eq:
                raise ConfigError(f"--strategy {text}: expected key=value, got {item!r}")
            settings[key.strip()] = json.loads(value) if value.strip()[:1].isdigit() else value.strip()
        if "budget" in settings:
            raise ConfigError(f"--strategy {text}: the budgets are --budgets")
        for key, option in (("constraints", "--constraint"), ("objectives", "--objectives")):
            if key in settings:
                raise ConfigError(f"--strategy {text}: {key} are the bench's {option} (every strategy, random "
                                  f"search included, gets the same)")
        spec = cls(text, name, settings)
        spec.options(1)  # checks the settings now
        return spec

    def with_costs(self, constraints: dict | None, objectives: list[str] | None) -> StrategySpec:
        """The same strategy under the bench's ``constraints`` and ``objectives`` (same label,
        so the paired tests compare strategies under the same constraint)."""
        extra = {k: v for k, v in (("constraints", constraints), ("objectives", objectives)) if v}
        if not extra:
            return self
        spec = StrategySpec(self.label, self.name, {**self.settings, **extra})
        spec.options(1)
        return spec

    def options(self, budget: int) -> Any:
        """The strategy's options at ``budget``."""
        config = registry.get("strategy", self.name).Config
        known = {f.name for f in fields(config)}
        for key in self.settings:
            if key not in known:
                raise ConfigError(f"--strategy {self.label}: unknown setting '{key}'; "
                                  f"valid: {', '.join(sorted(known - {'budget'}))}")
        return from_mapping(config, {**self.settings, "budget": budget}, "strategy")


def table_strategies() -> list[str]:
    """The registered strategies that search tables (:class:`~attnas.strategies.table_strategies._TableStrategy`)."""
    from attnas.strategies.table_strategies import _TableStrategy

    return sorted(e.name for e in registry.entries("strategy") if issubclass(e.obj, _TableStrategy))


def incumbent_curve(scores: np.ndarray, tests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validation and test performance of the incumbent after each query.

    The incumbent after ``q`` queries is the best of the first ``q`` on validation (the
    earliest on ties).

    Args:
        scores: Validation performance of the queried architectures, in query order.
        tests: Their test performance.
    """
    previous_best = np.maximum.accumulate(np.concatenate([[-np.inf], scores[:-1]]))
    positions = np.arange(len(scores))
    inc = np.maximum.accumulate(np.where(scores > previous_best, positions, 0))
    return scores[inc], tests[inc]


def run_cell(task: NasBenchGraphTask, space: NasBenchGraphSpace, spec: StrategySpec, budget: int,
             seeds: int) -> dict:
    """Search ``seeds`` times and keep each pick's performance and the anytime curves.

    Returns:
        ``{"strategy", "settings", "dataset", "budget", "seeds", "val", "test",
        "test_by_test", "curves", "seconds"}``: per seed the pick's validation and test
        performance, the best test performance among the queried architectures (what a
        search rewarded with the test column would report), and the incumbent's test
        performance after each query (``curves[k][q - 1]``).
    """
    from attnas.strategies.table_fronts import FrontMeter, found_front, table_objectives
    from attnas.strategies.table_strategies import multi_objective

    cls = registry.get("strategy", spec.name)
    options = spec.options(budget)
    index = space.index
    test_column = task.test_column(index.codes)
    val, test, by_test, curves, hv, front_test = [], [], [], [], [], []
    meter = None
    t0 = time.perf_counter()
    for seed in range(seeds):
        queries = task.validation_view(index.codes, index.neighbours)
        cls.run_loop(queries, options, seed)
        scores = np.asarray(queries.scores)
        tests = test_column[queries.trace]
        inc_val, inc_test = incumbent_curve(scores, tests)
        val.append(float(inc_val[-1]))
        test.append(float(inc_test[-1]))
        by_test.append(float(tests.max()))
        curves.append(np.round(inc_test, 6).tolist())
        if multi_objective(options):
            if meter is None:  # the true front, measured after the first search (never seen by one)
                table_F = table_objectives(task.validation_column(index.codes), queries, options.objectives)
                meter = FrontMeter(table_F, queries.feasible)
            front = found_front(queries, options.objectives)
            hv.append(meter.ratio(front))
            front_test.append(float(test_column[front].mean()))
    cell = {"strategy": spec.label, "name": spec.name, "settings": spec.settings, "dataset": task.options.dataset,
            "budget": budget, "seeds": seeds, "val": val, "test": test, "test_by_test": by_test, "curves": curves,
            "seconds": round(time.perf_counter() - t0, 3)}
    if meter is not None:
        cell.update(hv=hv, front_test=front_test, true_front_size=len(meter.front))
    return cell


def cell_path(out: Path, dataset: str, label: str, budget: int) -> Path:
    """Where a cell is kept (the label made a safe file name)."""
    safe = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in label)
    return out / "cells" / dataset / f"{safe}-{budget}.json"


def space_for(dataset: str) -> NasBenchGraphSpace:
    """The space a dataset's table covers (``proteins``: its five operations)."""
    return NasBenchGraphSpace(NasBenchGraphConfig(operations="proteins" if dataset == "proteins" else "all"))


def run_cells(out: Path, specs: Iterable[StrategySpec], datasets: Iterable[str], budgets: Iterable[int],
              seeds: int, log: Any = print) -> list[dict]:
    """Every cell of ``specs x datasets x budgets``, computing only those not yet in ``out``.

    A kept cell counts when it has the same strategy, settings and number of seeds.
    """
    specs, budgets = list(specs), list(budgets)
    cells = []
    for dataset in datasets:
        task, space = None, space_for(dataset)
        for spec in specs:
            for budget in budgets:
                path = cell_path(out, dataset, spec.label, budget)
                if path.exists():
                    kept = json.loads(path.read_text())
                    if kept.get("seeds") == seeds and kept.get("settings") == spec.settings:
                        cells.append(kept)
                        continue
                if task is None:
                    task = NasBenchGraphTask(NasBenchGraphTaskConfig(dataset))
                    space.check_task(task)
                cell = run_cell(task, space, spec, budget, seeds)
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(path, json.dumps(cell))
                log(f"{dataset:>9s} {spec.label:>24s} {budget:>4d} queries: test {np.mean(cell['test']):.4f} "
                    f"({cell['seconds']:.2f} s)")
                cells.append(cell)
    return cells


def check_budgets(budgets: list[int]) -> list[int]:
    """Positive, distinct, ascending budgets.

    Raises:
        ConfigError: Otherwise.
    """
    if not budgets or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in budgets):
        raise ConfigError(f"--budgets: positive integers, got {budgets}")
    return sorted(set(budgets))

