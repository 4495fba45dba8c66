"""``attnas bench``: search strategies measured on NAS-Bench-Graph's tables.

Every strategy x dataset x budget is searched with seeds ``0..seeds-1`` (paired: seed
``k`` gives every strategy the same first random draws) by :mod:`attnas.bench.runner`;
:mod:`attnas.bench.summary` turns the cells into anytime curves and paired tests against
random search, per dataset and pooled over the datasets other than ``proteins`` (the
negative control); :mod:`attnas.bench.report` writes ``bench.json``, ``bench.md`` and a
figure per dataset. Finished cells are kept in ``cells/``, so running the same command
again continues a killed bench. ``constraints`` and ``objectives`` apply to every strategy
(random search included), so the paired tests compare strategies under the same
constraint; with two or more objectives the bench also compares the hypervolume of the
found fronts (:mod:`attnas.strategies.table_fronts`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from attnas.config import check_seeds
from attnas.core.errors import ConfigError, unknown_name
from attnas.data.nas_bench_graph import DATASETS, tables_folder

from .runner import DEFAULT_BUDGETS, DEFAULT_STRATEGIES, StrategySpec, check_budgets, run_cells


def run_bench(out: str | Path, strategies: Sequence[str] = DEFAULT_STRATEGIES,
              datasets: Sequence[str] = DATASETS, budgets: Sequence[int] = DEFAULT_BUDGETS, seeds: int = 100,
              log=print, constraints: dict | None = None, objectives: Sequence[str] | None = None) -> dict:
    """Run (or continue) a bench into ``out`` and write its results.

    Args:
        out: The output folder (created; kept cells are reused).
        strategies: Strategy specifications (:class:`~attnas.bench.runner.StrategySpec`);
            ``table-random`` must be among them (the paired tests compare with it).
        datasets: NAS-Bench-Graph datasets.
        budgets: Numbers of distinct architectures queried.
        seeds: Searches per cell.
        constraints: Upper limits on the table's costs for every strategy (``{params: 1.2e6}``).
        objectives: The validation metric and costs every strategy trades off
            (``[val_score, params]``); strategies without Pareto fronts are refused.

    Returns:
        The summary (:func:`attnas.bench.summary.summarise_cells`).

    Raises:
        ConfigError: Bad strategies, datasets, budgets or seeds (before anything is written).
        DataError: The tables' package is missing.
    """
    from .report import write_outputs
    from .summary import BASELINE, summarise_cells

    from attnas.costs.pareto import normalize_constraints

    objectives = list(objectives) if objectives else None
    constraints = normalize_constraints(constraints) or None
    specs = [StrategySpec.parse(s).with_costs(constraints, objectives) for s in strategies]
    if BASELINE not in [s.label for s in specs]:
        raise ConfigError(f"--strategy: the bench compares with '{BASELINE}'; include it")
    if len({s.label for s in specs}) != len(specs):
        raise ConfigError("--strategy: a strategy is given twice")
    for d in datasets:
        if d not in DATASETS:
            raise ConfigError(f"--datasets: {unknown_name('NAS-Bench-Graph dataset', d, DATASETS)}")
    budgets = check_budgets(list(budgets))
    seeds = check_seeds(seeds)
    tables_folder()
    if constraints or objectives:
        check_costs_settings(specs, datasets, budgets)
    out = Path(out)
    t0 = time.perf_counter()
    cells = run_cells(out, specs, datasets, budgets, seeds, log=log)
    summary = summarise_cells(cells)
    summary.update(constraints=specs[0].settings.get("constraints"), objectives=specs[0].settings.get("objectives"))
    write_outputs(out, summary, round(time.perf_counter() - t0, 1), seeds)
    return summary


def check_costs_settings(specs: Sequence[StrategySpec], datasets: Sequence[str], budgets: Sequence[int]) -> None:
    """Refuse, before any cell runs, objectives a strategy cannot trade off and constraints
    that fewer than the largest budget's architectures of a dataset's table meet.

    Raises:
        ConfigError: One line naming the strategy or the constraint and the dataset.
    """
    from attnas import registry
    from attnas.tasks.nas_bench_graph import NasBenchGraphTask, NasBenchGraphTaskConfig

    from .runner import space_for

    for dataset in datasets:
        task, space = NasBenchGraphTask(NasBenchGraphTaskConfig(dataset)), space_for(dataset)
        for spec in specs:
            try:
                registry.get("strategy", spec.name).check_task(spec.options(max(budgets)), space, task)
            except ConfigError as exc:
                raise ConfigError(f"{exc} (dataset {dataset}, strategy {spec.label})") from None
