"""Sweeps: independent searches of one recipe over seeds and a grid of settings.

``attnas sweep RECIPE --seeds 3 --grid 'space.hidden=[16, 32]' --out runs/sweep`` runs
2 x 3 searches into sub-run directories of ``runs/sweep`` and summarises them::

    runs/sweep/
      sweep.json                   the plan: recipe, overrides, grid, seeds, runs
      000_hidden-16_seed-0/ ...    one ordinary run directory per search
      summary.json                 per run its numeric metrics; per grid point mean and std

Every grid point's config is validated, and its data loaded, before anything is
written. The searches are independent: with ``workers`` they run side by side on Ray
(each in its own worker process; the sweep folder must be visible to the workers),
with the same results as one after the other. Running the same sweep again into the
same folder continues it: finished runs are kept, killed ones resumed.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from attnas import pipeline
from attnas.config import check_run_count, check_seeds, config_from_dict, load_config, parse_override, read_recipe
from attnas.core.errors import ConfigError, RunDirError
from attnas.data.root import resolve_data_root
from attnas.runs.atomic_files import atomic_write_json
from attnas.runs.build import build_space, build_task, check_strategy, check_task
from attnas.runs.run_dir import RunDir, run_folder_name
from attnas.scale.parallel import make_executor

PLAN = "sweep.json"
SUMMARY = "summary.json"


def grid_points(grid: list[str] | tuple[str, ...]) -> list[list[str]]:
    """The cartesian product of ``key=[v1, v2, ...]`` entries, as lists of ``key=value`` overrides.

    Raises:
        ConfigError: When an entry is not ``key=[...]`` with at least one value, or a key repeats.
    """
    axes, keys = [], set()
    for text in grid:
        path, values = parse_override(text)
        key = ".".join(path)
        if not isinstance(values, list) or not values:
            raise ConfigError(f"--grid {text!r}: expected a list of values, e.g. {key}=[16, 32]")
        if key in keys:
            raise ConfigError(f"--grid {key}: given twice")
        keys.add(key)
        axes.append([f"{key}={json.dumps(v)}" for v in values])
    check_run_count(math.prod(len(a) for a in axes), "--grid")
    return [list(p) for p in itertools.product(*axes)]


def _run_name(index: int, point: list[str], seed: int) -> str:
    parts = [f"{o.split('=', 1)[0].split('.')[-1]}-{o.split('=', 1)[1]}" for o in point] + [f"seed-{seed}"]
    name = re.sub(r"[^A-Za-z0-9._-]+", "", "_".join(parts))[:80]
    return f"{index:03d}_{name}"


def plan_sweep(recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = (), seeds: int = 1,
               grid: list[str] | tuple[str, ...] = ()) -> dict:
    """The runs of a sweep, every config validated (nothing is written).

    Returns:
        ``{"recipe": mapping, "overrides", "grid", "seeds", "runs": [{"name", "point", "overrides", "seed"}]}``.
    """
    check_seeds(seeds)
    data = read_recipe(recipe)
    runs = []
    points = grid_points(grid)
    check_run_count(len(points) * seeds, f"--seeds {seeds} x {len(points)} grid point(s)")
    for point in points:
        cfg = load_config(data, [*overrides, *point])
        for s in range(seeds):
            seed = cfg.seed + s
            runs.append({"name": _run_name(len(runs), point, seed), "point": point,
                         "overrides": [*overrides, *point], "seed": seed})
    return {"recipe": data, "overrides": list(overrides), "grid": list(grid), "seeds": seeds, "runs": runs}


def run_one(item: dict, recipe: dict, out: str, data_dir: str | None, device: str | None) -> dict:
    """Run (or continue, or just read) one search of a sweep; returns its summary row."""
    run_dir = Path(out) / item["name"]
    pipeline.search_or_resume(run_dir, recipe, item["overrides"], seed=item["seed"], data_dir=data_dir, device=device)
    metrics = json.loads((run_dir / RunDir.METRICS).read_text())
    numeric = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {"name": item["name"], "point": item["point"], "seed": item["seed"], "metrics": numeric}


def summarise(rows: list[dict]) -> list[dict]:
    """Per grid point: the mean and standard deviation over seeds of every numeric metric."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row["point"]), []).append(row)
    out = []
    for point, members in groups.items():
        keys = sorted(set.intersection(*(set(r["metrics"]) for r in members)))
        entry: dict[str, Any] = {"point": list(point), "runs": [r["name"] for r in members]}
        for k in keys:
            vals = [r["metrics"][k] for r in members]
            entry[f"{k}_mean"] = statistics.fmean(vals)
            entry[f"{k}_std"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
        out.append(entry)
    return out


def sweep(recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = (), seeds: int = 1,
          grid: list[str] | tuple[str, ...] = (), out: str | Path | None = None,
          data_dir: str | Path | None = None, device: str | None = None, workers: int | None = None,
          ray_address: str | None = None) -> dict:
    """Run the searches of a sweep into sub-run directories of ``out`` and summarise them.

    Args:
        recipe: A shipped recipe name, a YAML path or a mapping.
        overrides: ``--set`` overrides shared by every run.
        seeds: Seeds per grid point (the recipe's seed, +1, ...).
        grid: ``key=[v1, v2]`` entries; every combination is searched.
        out: The sweep folder (default ``runs/<name>-sweep-<time>``).
        data_dir: The data root.
        device: Where each search runs (Ray workers: CPU).
        workers: Searches at once on Ray (``None``/1: one after the other here).
        ray_address: A Ray cluster address.

    Returns:
        The summary (also written to ``out/summary.json``).
    """
    plan = plan_sweep(recipe, overrides, seeds, grid)
    make_executor(workers, ray_address, check_only=True)
    name = config_from_dict(plan["recipe"]).name
    out = Path(out) if out else Path("runs") / f"{run_folder_name(name)}-sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    RunDir.check_writable(out)
    if (out / PLAN).exists():
        old = json.loads((out / PLAN).read_text())
        if {k: old.get(k) for k in plan} != json.loads(json.dumps(plan)):
            raise RunDirError(f"{out} holds another sweep (its {PLAN} differs); choose another --out")
    # every run's space and strategy are checked, and the data of every distinct task loads
    # and is checked against them, before anything is written
    root = resolve_data_root(data_dir)
    by_task: dict[str, list] = {}
    for item in plan["runs"]:
        cfg = load_config(plan["recipe"], item["overrides"])
        space = build_space(cfg)
        check_strategy(cfg, space)
        by_task.setdefault(json.dumps(cfg.to_dict()["task"], sort_keys=True), []).append((cfg, space))
    for parts in by_task.values():
        task = build_task(parts[0][0], root, torch.device("cpu"))
        checked = set()
        for cfg, space in parts:
            key = json.dumps({**cfg.to_dict(), "seed": None}, sort_keys=True)  # the checks do not depend on the seed
            if key not in checked:
                checked.add(key)
                check_task(cfg, space, task)
    with make_executor(workers, ray_address) as executor:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / PLAN, {**plan, **executor.describe()})
        rows = list(executor.imap(run_one, plan["runs"], plan["recipe"], str(out.resolve()), str(root), device))
    summary = {"recipe": name, "seeds": seeds, "grid": list(grid), "runs": rows, "points": summarise(rows)}
    atomic_write_json(out / SUMMARY, summary)
    return summary
