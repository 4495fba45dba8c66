"""``attnas compare``: is the searched attention better than random search and hand-designed attention?

::

    attnas compare autoattend-cora-quick --seeds 10 --out runs/cmp

runs, on the recipe's task and data, the recipe's search, random search in the same space
at the same budget and every hand-designed baseline the space declares
(:mod:`attnas.comparison.plan`), then retrains each row's architecture with the same
``N`` seeds under the recipe's ``retrain`` budget, and judges the search with paired
tests (:mod:`attnas.comparison.stats`)::

    runs/cmp/
      compare-plan.json     the rows (full recipes) and the number of seeds
      search/ random/ gcn/ gat/   one ordinary run directory per row (retrain/ holds its seeds)
      compare.json          per row mean, std, 95 % CI, parameters, times; the verdicts
      compare.md            the same as a table, with the verdicts in words
      compare.png           every seed's score per row

Every row's config, strategy and data are checked before anything is written. Running
the same command again into the same folder continues it: finished rows and seeds are
kept, killed searches resumed. With ``workers`` the rows' searches, and then each row's
seeds, run side by side on Ray with the same results as one after the other.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from attnas import pipeline
from attnas.atomic_files import atomic_write_json
from attnas.build import build_space, build_task, check_strategy, check_task
from attnas.comparison.plan import Row, plan_rows
from attnas.comparison.report import write_compare_files
from attnas.comparison.stats import paired_verdict, summarise
from attnas.config import check_seeds, load_config, to_mapping
from attnas.data.root import resolve_data_root
from attnas.errors import RunDirError
from attnas.parallel import make_executor
from attnas.retraining import retrain
from attnas.runs import RunDir, run_folder_name

PLAN = "compare-plan.json"
RESULT = "compare.json"


def compare(recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = (), seeds: int | None = None,
            baselines: list[str] | tuple[str, ...] | None = None, random: bool = True,
            out: str | Path | None = None, data_dir: str | Path | None = None, device: str | None = None,
            workers: int | None = None, ray_address: str | None = None) -> dict:
    """Compare a recipe's search against random search and hand-designed baselines.

    Args:
        recipe: A shipped recipe name, a YAML path or a mapping; its strategy must search.
        overrides: ``--set`` overrides applied to every row (e.g. the task's data).
        seeds: Retraining seeds per row (default: the recipe's ``compare.seeds``).
        baselines: Names of the space's baselines (default: ``compare.baselines``, else all).
        random: Whether to run the random-search row.
        out: The comparison folder (default ``runs/<name>-compare-<time>``).
        data_dir: The data root.
        device: Where rows train (Ray workers: CPU).
        workers: Rows, then seeds, side by side on this many Ray workers.
        ray_address: A Ray cluster address.

    Returns:
        The comparison (also written to ``out/compare.json``).

    Raises:
        AttnasError: For bad input, before anything is written.
    """
    config, rows = plan_rows(recipe, overrides, baselines, random)
    n = check_seeds(config.compare.seeds if seeds is None else seeds)
    make_executor(workers, ray_address, check_only=True)
    out = Path(out) if out else Path("runs") / f"{run_folder_name(config.name)}-compare-{time.strftime('%Y%m%d-%H%M%S')}"
    plan = {"recipe": config.name, "overrides": list(overrides), "seeds": n, "rows": [r.to_dict() for r in rows]}
    _check_folder(out, plan)
    root = resolve_data_root(data_dir)
    task = build_task(config, root, torch.device("cpu"))
    for row in rows:  # every row's space, strategy and data agree before anything is written
        cfg = load_config(row.recipe)
        space = build_space(cfg)
        check_strategy(cfg, space)
        check_task(cfg, space, task)
    with make_executor(workers, ray_address) as executor:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / PLAN, plan)
        list(executor.imap(run_row, [r.to_dict() for r in rows], str(out.resolve()), str(root), device))
    summaries = {row.name: retrain(out / row.name, seeds=n, data_dir=root, device=device, workers=workers,
                                   ray_address=ray_address) for row in rows}
    result = collect(out, config.to_dict(), rows, summaries, task.metric, n)
    atomic_write_json(out / RESULT, result)
    write_compare_files(out, result)
    return result


def _check_folder(out: Path, plan: dict) -> None:
    RunDir.check_writable(out)
    if (out / PLAN).exists():
        old = json.loads((out / PLAN).read_text())
        if old != json.loads(json.dumps(plan)):
            raise RunDirError(f"{out} holds another comparison (its {PLAN} differs); choose another --out")
    elif out.is_dir() and any(out.iterdir()):
        raise RunDirError(f"{out} is not empty and holds no comparison; choose a new or empty folder with --out")


def run_row(row: dict, out: str, data_dir: str | None, device: str | None) -> str:
    """Run (or continue, or just read) one row's search; returns the row's name."""
    pipeline.search_or_resume(Path(out) / row["name"], row["recipe"], data_dir=data_dir, device=device)
    return row["name"]


def _search_seconds(run: RunDir) -> float | None:
    """Wall time from the run's creation to the end of its search (with any pause of a resumed run)."""
    info = run.read_json(RunDir.RUN) if run.exists(RunDir.RUN) else {}
    done = run.events("search-done")
    if "created" not in info or not done:
        return None
    return round(done[0]["time"] - info["created"], 2)


def collect(out: Path, recipe: dict, rows: list[Row], summaries: dict[str, dict], metric: str, seeds: int) -> dict:
    """The comparison's numbers: per row its scores and summaries, and the paired verdicts."""
    table = []
    for row in rows:
        run = RunDir(out / row.name)
        metrics = run.read_json(RunDir.METRICS)
        s = summaries[row.name]
        per_seed = s["per_seed"]
        test = [r[f"test_{metric}"] for r in per_seed]
        val = [r[f"val_{metric}"] for r in per_seed]
        table.append({"name": row.name, "kind": row.kind, "description": row.description,
                      "arch": metrics.get("arch"), "params": metrics.get("params"), "init": s["init"],
                      "search_seconds": _search_seconds(run) if row.kind != "baseline" else None,
                      "train_seconds": round(sum(r.get("seconds", 0.0) for r in per_seed), 2),
                      "test": summarise(test), "val": summarise(val), "test_per_seed": test, "val_per_seed": val})
    by_name = {r["name"]: r for r in table}
    search = by_name["search"]
    baselines = [r for r in table if r["kind"] == "baseline"]
    best = max(baselines, key=lambda r: r["test"]["mean"])
    verdicts = [paired_verdict(search["test_per_seed"], best["test_per_seed"], "search", best["name"])]
    if "random" in by_name:
        verdicts.append(paired_verdict(search["test_per_seed"], by_name["random"]["test_per_seed"], "search", "random"))
        verdicts.append(paired_verdict(by_name["random"]["test_per_seed"], best["test_per_seed"], "random", best["name"]))
    return {"recipe": recipe["name"], "task": recipe["task"], "metric": metric, "seeds": seeds,
            "paper_seeds": recipe.get("compare", {}).get("paper_seeds"), "retrain": to_mapping(recipe["retrain"]),
            "best_baseline": best["name"], "rows": table, "verdicts": verdicts}
