"""``attnas compare``: is the searched attention better than random search and hand-designed attention?

::

    attnas compare autoattend-cora-quick --seeds 10 --out runs/cmp

runs, on the recipe's task and data, the recipe's search, random search in the same space
at the same compute and every hand-designed baseline the space declares
(:mod:`attnas.comparison.plan`), then retrains each row's architecture with the same
``N`` training seeds (the baselines with their own papers' protocols), and judges the
search with paired tests (:mod:`attnas.comparison.stats`)::

    runs/cmp/
      compare-plan.json     the rows (full recipes) and the number of seeds
      search/ random/ gcn/ gat/   one ordinary run directory per row (retrain/ holds its seeds)
      compare.json          per row mean, std, 95 % CI, parameters, times; the verdicts
      compare.md            the same as a table, with the verdicts in words
      compare.png           every seed's score per row

The search seed is the larger source of variance of a one-shot search, so with
``search_seeds`` K > 1 (``--search-seeds``; default ``compare.search_seeds``, else 3 for
one-shot strategies, 1 for the others) the comparison is repeated K times with the
recipe's seed ``s, s + 1, ...`` (each repetition a folder ``search-seed-<s>/`` laid out as
above: an independent search, random search and baselines, each retrained with that
seed's training seeds), and the verdict is a paired t-test over the search seeds of the
per-search means (the training seeds average inside), with the test over all training
seeds pooled shown beside it. Below three pairs no verdict is given, only the means.

Every row's config, strategy and data are checked before anything is written. Running
the same command again into the same folder continues it: finished rows and seeds are
kept, killed searches resumed. A command that only adds rows to a folder's comparison
(the random-search row a ``--no-random`` run left out, another baseline) runs the new
rows and keeps the finished ones; its rows are compared with the folder's after both are
filled with this version's defaults, so a folder written before a new setting existed
(at its default) is continued, and any other change is refused. With ``workers`` the rows' searches, and then each row's
seeds, run side by side on Ray with the same results as one after the other.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from pathlib import Path

import torch

from attnas import registry, pipeline
from attnas.comparison.plan import Row, plan_rows
from attnas.comparison.report import write_compare_files
from attnas.comparison.stats import paired_verdict, summarise
from attnas.config import check_seeds, load_config, to_mapping
from attnas.core.errors import AttnasError, RunDirError
from attnas.data.root import resolve_data_root
from attnas.reporting.progress import labelled
from attnas.runs.atomic_files import atomic_write_json
from attnas.runs.build import build_space, build_task, check_retraining, check_strategy, check_task
from attnas.runs.run_dir import RunDir, run_folder_name
from attnas.scale.parallel import make_executor
from attnas.training.retraining import retrain

PLAN = "compare-plan.json"
RESULT = "compare.json"

_log = logging.getLogger(__name__)


def row_label(row: dict) -> str:
    """How progress lines and notices name a row: its name and its search seed (the recipe's
    seed, which every row of one search seed shares)."""
    return f"compare row {row['name']}, search seed {row['recipe'].get('seed')}"


def compare(recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = (), seeds: int | None = None,
            baselines: list[str] | tuple[str, ...] | None = None, random: bool = True,
            out: str | Path | None = None, data_dir: str | Path | None = None, device: str | None = None,
            workers: int | None = None, ray_address: str | None = None, search_seeds: int | None = None,
            random_architecture: bool = False) -> dict:
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
        search_seeds: Independent searches per searching row (default: the recipe's
            ``compare.search_seeds``, else the strategy's ``compare_search_seeds``).
        random_architecture: Also train one architecture drawn from the prior.

    Returns:
        The comparison (also written to ``out/compare.json``).

    Raises:
        AttnasError: For bad input, before anything is written.
    """
    config, rows = plan_rows(recipe, overrides, baselines, random, random_architecture)
    n = check_seeds(config.compare.seeds if seeds is None else seeds)
    k = search_seeds if search_seeds is not None else config.compare.search_seeds
    if k is None:
        k = registry.get("strategy", config.strategy.name).compare_search_seeds
    k = check_seeds(k, "--search-seeds")
    make_executor(workers, ray_address, check_only=True)
    out = Path(out) if out else Path("runs") / f"{run_folder_name(config.name)}-compare-{time.strftime('%Y%m%d-%H%M%S')}"
    if k == 1:
        plans = [(out, list(overrides), rows)]
    else:
        plans = []
        for s in range(config.seed, config.seed + k):
            sub = [*overrides, f"seed={s}"]
            plans.append((out / f"search-seed-{s}", sub, plan_rows(recipe, sub, baselines, random, random_architecture)[1]))
        top_plan = {"recipe": config.name, "overrides": list(overrides), "seeds": n, "search_seeds": k,
                    "folders": [p[0].name for p in plans]}
        _check_folder(out, top_plan, nested=True)
    for folder, sub, sub_rows in plans:
        _check_folder(folder, _plan(config.name, sub, n, sub_rows))
    root = resolve_data_root(data_dir)
    task = build_task(config, root, torch.device("cpu"))
    for row in rows:  # every row's space, strategy and data agree before anything is written
        cfg = load_config(row.recipe)
        space = build_space(cfg)
        check_strategy(cfg, space)
        check_task(cfg, space, task)
        check_retraining(cfg.retrain.init, task)
    if k > 1:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / PLAN, top_plan)
    results = [_compare_once(folder, sub_rows, _plan(config.name, sub, n, sub_rows), root, n, device, workers,
                             ray_address, task.metric) for folder, sub, sub_rows in plans]
    if k == 1:
        return results[0]
    result = pool_search_seeds(config.to_dict(), results, top_plan["folders"])
    atomic_write_json(out / RESULT, result)
    write_compare_files(out, result)
    return result


def _plan(name: str, overrides: list[str], n: int, rows: list[Row]) -> dict:
    return {"recipe": name, "overrides": list(overrides), "seeds": n, "rows": [r.to_dict() for r in rows]}


def _compare_once(out: Path, rows: list[Row], plan: dict, root: Path, n: int, device: str | None,
                  workers: int | None, ray_address: str | None, metric: str) -> dict:
    """One search seed's comparison in ``out``: every row's run, its retraining seeds, the verdicts."""
    with make_executor(workers, ray_address) as executor:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / PLAN, plan)
        list(executor.imap(run_row, [r.to_dict() for r in rows], str(out.resolve()), str(root), device))
    summaries = {row.name: _retrain_row(row.to_dict(), out, n, root, device, workers, ray_address) for row in rows}
    result = collect(out, rows[0].recipe, rows, summaries, metric, n)  # rows[0]: the searched recipe
    atomic_write_json(out / RESULT, result)
    write_compare_files(out, result)
    return result


def _check_folder(out: Path, plan: dict, nested: bool = False) -> None:
    """Refuse a folder that holds something else than this comparison (``nested``: the top
    folder of a comparison over several search seeds, whose sub-folders it may hold)."""
    RunDir.check_writable(out)
    if (out / PLAN).exists():
        try:
            old = json.loads((out / PLAN).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise RunDirError(f"{out / PLAN} is unreadable ({e}); choose another --out") from e
        problem = plan_change(old, json.loads(json.dumps(plan)))
        if problem:
            raise RunDirError(f"{out} holds another comparison ({problem}); choose another --out")
    elif out.is_dir() and any(out.iterdir()):
        if nested or not (out.parent / PLAN).exists():
            raise RunDirError(f"{out} is not empty and holds no comparison; choose a new or empty folder with --out")


def plan_change(old: dict, new: dict) -> str | None:
    """What keeps a folder's comparison plan ``old`` from being continued as ``new``.

    ``None`` when ``new`` is ``old`` or ``old`` with rows added; each of ``old``'s rows must
    be in ``new`` with the same recipe once both are filled with this version's defaults
    (:func:`_canonical`), and every other entry (recipe name, overrides, seeds, folders) equal.
    Otherwise a few words naming the difference.
    """
    for key in sorted(set(old) | set(new)):
        if key != "rows" and old.get(key) != new.get(key):
            return f"its {PLAN} has another {key}"
    if old == new:
        return None
    if not isinstance(old.get("rows"), list) or not isinstance(new.get("rows"), list):
        return f"its {PLAN} differs"
    rows = {r.get("name"): r for r in new["rows"]}
    for row in old["rows"]:
        name = row.get("name")
        if name not in rows:
            return f"its row '{name}' is not in this comparison"
        if row == rows[name]:
            continue
        ours = rows[name]
        if (row.get("kind"), row.get("description")) != (ours.get("kind"), ours.get("description")) \
                or _canonical(row.get("recipe")) != _canonical(ours.get("recipe")):
            return f"its row '{name}' differs"
    return None


def _canonical(recipe: object) -> dict | None:
    """A row's recipe with every setting this version knows filled with its default (``None``
    when it no longer loads)."""
    if not isinstance(recipe, dict):
        return None
    try:
        return json.loads(json.dumps(load_config(copy.deepcopy(recipe)).to_dict()))
    except AttnasError:
        return None


def _retrain_row(row: dict, out: Path, n: int, root: Path, device: str | None, workers: int | None,
                 ray_address: str | None) -> dict:
    """Retrain one row's architecture with the ``n`` training seeds (finished seeds are kept)."""
    label = row_label(row)
    _log.info("%s: retraining with %d training seeds", label, n)
    with labelled(label):
        return retrain(out / row["name"], seeds=n, data_dir=root, device=device, workers=workers,
                       ray_address=ray_address)


def run_row(row: dict, out: str, data_dir: str | None, device: str | None) -> str:
    """Run (or continue, or just read) one row's search; returns the row's name."""
    label = row_label(row)
    _log.info("%s: %s", label, "training the baseline" if row["kind"] == "baseline" else "searching")
    with labelled(label):
        pipeline.search_or_resume(Path(out) / row["name"], row["recipe"], data_dir=data_dir, device=device)
    return row["name"]


def run_search_seconds(run: RunDir) -> float | None:
    """Seconds the run spent searching.

    The strategy's own ``search_seconds`` metric where it reports one (its resumable phases
    count running time only, so a search stopped and resumed later is not charged the pause);
    else the wall time from the run's creation to the end of its search.
    """
    metrics = run.read_json(RunDir.METRICS) if run.exists(RunDir.METRICS) else {}
    if isinstance(metrics.get("search_seconds"), (int, float)):
        return round(float(metrics["search_seconds"]), 2)
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
                      "search_seconds": run_search_seconds(run) if row.kind != "baseline" else None,
                      "train": _protocol(row.recipe["retrain"], s["init"]),
                      "still_improving": still_improving(per_seed, row.recipe["retrain"]),
                      "train_seconds": round(sum(r.get("seconds", 0.0) for r in per_seed), 2),
                      "test": summarise(test), "val": summarise(val), "test_per_seed": test, "val_per_seed": val})
    by_name = {r["name"]: r for r in table}
    best, pairs = verdict_pairs(table)
    verdicts = [paired_verdict(by_name[a]["test_per_seed"], by_name[b]["test_per_seed"], a, b) for a, b in pairs]
    return {"recipe": recipe["name"], "task": recipe["task"], "metric": metric, "seeds": seeds,
            "paper_seeds": recipe.get("compare", {}).get("paper_seeds"), "retrain": to_mapping(recipe["retrain"]),
            "best_baseline": best["name"], "rows": table, "verdicts": verdicts}


def verdict_pairs(table: list[dict]) -> tuple[dict, list[tuple[str, str]]]:
    """The best baseline, chosen by mean validation score (test is only reported), and the
    pairs of rows a comparison judges: search against it, against random search, random
    search against it, and search against one prior draw, for the rows the table has."""
    names = {r["name"] for r in table}
    best = max((r for r in table if r["kind"] == "baseline"), key=lambda r: r["val"]["mean"])
    pairs = [("search", best["name"])]
    if "random" in names:
        pairs += [("search", "random"), ("random", best["name"])]
    if "random-architecture" in names:
        pairs.append(("search", "random-architecture"))
    return best, pairs


def still_improving(per_seed: list[dict], retrain_section: dict) -> int | None:
    """How many training seeds used their whole budget and found their best validation score
    in its last tenth: a row whose validation curve had not flattened (under-trained).

    ``None`` when the seeds do not record their best epoch (results of older versions).
    """
    budget = retrain_section.get("epochs")
    if not budget or any("best_epoch" not in r for r in per_seed):
        return None
    last = budget - max(1, budget // 10)
    return sum(1 for r in per_seed if r["epochs"] >= budget and r["best_epoch"] > last)


def _protocol(retrain_section: dict, init: str) -> str:
    """A row's training protocol in a few words (for the table)."""
    r = retrain_section
    lr = r.get("finetune_lr") if init == "supernet" and r.get("finetune_lr") is not None else r.get("lr")
    return (f"{r.get('epochs')} ep, {r.get('optimizer', 'adam')} lr {lr}, wd {r.get('weight_decay')}, "
            f"patience {r.get('patience')}")


def pool_search_seeds(recipe: dict, results: list[dict], folders: list[str]) -> dict:
    """Pool the comparisons of several search seeds: per row the per-search means, and verdicts
    paired over search seeds (with the test over every training seed pooled beside them).

    Args:
        recipe: The searched recipe (as a mapping).
        results: One :func:`collect` result per search seed, in seed order.
        folders: Their folder names.
    """
    names = [r["name"] for r in results[0]["rows"]]
    table = []
    for name in names:
        per = [next(r for r in res["rows"] if r["name"] == name) for res in results]
        test_means = [r["test"]["mean"] for r in per]
        val_means = [r["val"]["mean"] for r in per]
        pooled_test = [x for r in per for x in r["test_per_seed"]]
        pooled_val = [x for r in per for x in r["val_per_seed"]]
        table.append({"name": name, "kind": per[0]["kind"], "description": per[0]["description"],
                      "train": per[0].get("train"), "init": per[0]["init"], "params": per[0].get("params"),
                      "still_improving": _sum_or_none([r.get("still_improving") for r in per]),
                      "archs": [r["arch"] for r in per],
                      "search_seconds": _sum_or_none([r.get("search_seconds") for r in per]),
                      "train_seconds": round(sum(r["train_seconds"] for r in per), 2),
                      "test": summarise(pooled_test), "val": summarise(pooled_val),
                      "test_per_search": test_means, "val_per_search": val_means,
                      "test_per_search_summary": summarise(test_means),
                      "test_per_seed": pooled_test, "val_per_seed": pooled_val})
    by_name = {r["name"]: r for r in table}
    best, pairs = verdict_pairs(table)
    verdicts = [paired_verdict(by_name[a]["test_per_search"], by_name[b]["test_per_search"], a, b, unit="search seeds")
                for a, b in pairs]
    training = [paired_verdict(by_name[a]["test_per_seed"], by_name[b]["test_per_seed"], a, b,
                               unit="training seeds") for a, b in pairs]
    first = results[0]
    return {"recipe": recipe["name"], "task": recipe["task"], "metric": first["metric"], "seeds": first["seeds"],
            "search_seeds": len(results), "folders": folders, "paper_seeds": first.get("paper_seeds"),
            "retrain": first["retrain"], "best_baseline": best["name"], "rows": table, "verdicts": verdicts,
            "training_seed_verdicts": training}


def _sum_or_none(values: list) -> float | None:
    return None if any(v is None for v in values) else round(sum(values), 2)

