"""How well a one-shot supernet ranks architectures: its scores against stand-alone training.

A one-shot search (AutoAttend, Sec. 4.2; SPOS) trusts the supernet's validation score of
an architecture (Eq. 5, inherited weights) to order architectures as training each one
alone would. This measures that trust for any space with a supernet:

1. the recipe's supernet is trained (a normal run directory, resumable) or taken from a
   finished search run;
2. ``archs`` distinct architectures are drawn from the space's prior Γ(A) with a fixed
   seed, and each is scored with the supernet's weights;
3. each is trained stand-alone from scratch with the recipe's ``retrain`` settings, with
   ``seeds`` seeds (results are appended to ``standalone.jsonl`` as they finish, so a
   killed measurement continues where it stopped and several supernets can be compared on
   the same stand-alone results);
4. Kendall's tau and Spearman's rho between the supernet scores and the mean stand-alone
   validation (and test) scores, and a scatter plot.

Example:
    >>> from attnas.reporting.ranking import supernet_ranking                        # doctest: +SKIP
    >>> supernet_ranking("autoattend-cora", out="runs/ranking-cora")       # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from attnas.config import load_config
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError, RunDirError
from attnas.data.root import resolve_data_root
from attnas.reporting.progress import progress
from attnas.runs.atomic_files import atomic_write_file, atomic_write_json, atomic_write_text
from attnas.runs.rng import seed_everything
from attnas.runs.run_dir import RunDir, read_jsonl, run_folder_name


def sample_architectures(space: Any, n: int, seed: int) -> list[Arch]:
    """``n`` distinct architectures from the space's prior, reproducible from ``seed``."""
    rng = random.Random(seed)
    out, seen = [], set()
    for _ in range(100 * n):
        a = space.sample(rng)
        if a.key() not in seen:
            seen.add(a.key())
            out.append(a)
            if len(out) == n:
                break
    return out


def rank_correlations(x: list[float], y: list[float]) -> dict:
    """Kendall's tau-b and Spearman's rho of two score lists, with their p-values."""
    from scipy import stats

    tau = stats.kendalltau(x, y)
    rho = stats.spearmanr(x, y)
    return {"kendall_tau": float(tau.statistic), "kendall_p": float(tau.pvalue),
            "spearman_rho": float(rho.statistic), "spearman_p": float(rho.pvalue)}


def _claim(folder: Path, name: str) -> bool:
    """Claim one stand-alone training for this process; a claim of a process that is gone is taken over."""
    import os

    folder.mkdir(exist_ok=True)
    path = folder / name
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            pid = int(path.read_text() or 0)
            os.kill(pid, 0)
            return pid == os.getpid()
        except (ValueError, ProcessLookupError):
            path.write_text(str(os.getpid()))
            return True
        except PermissionError:
            return False
    with os.fdopen(fd, "w") as fh:
        fh.write(str(os.getpid()))
    return True


def _train_standalone(space: Any, task: Any, train: Any, drawn: list[Arch], keys: list[str], seeds: int,
                      done_file: Path) -> dict:
    """Train every (architecture, seed) not in ``done_file`` yet and append it there.

    Several processes may measure into one folder at once (e.g. two supernet variants):
    each claims a training before it starts it, so none is trained twice.
    """
    import time

    from attnas.training.train import fit

    claims = done_file.parent / "claims"
    jobs = [(i, k) for i in range(len(drawn)) for k in range(seeds)]
    done = {(r["key"], r["seed"]): r for r in read_jsonl(done_file)}
    with progress("stand-alone training", len(jobs), completed=len(done)) as bar:
        while True:
            done = {(r["key"], r["seed"]): r for r in read_jsonl(done_file)}
            todo = [(i, k) for i, k in jobs if (keys[i], k) not in done]
            if not todo:
                return done
            mine = next(((i, k) for i, k in todo if _claim(claims, f"{i}-{k}")), None)
            if mine is None:  # the rest is being trained by other processes
                time.sleep(2)
                continue
            i, k = mine
            seed_everything(k)
            model = space.build(drawn[i], task).to(task.device)
            res = fit(model, task, train, seed=k, desc=f"arch {i + 1} seed {k}")
            row = {"key": keys[i], "index": i, "seed": k, "val": res.val, "test": res.test, "epochs": res.epochs}
            with open(done_file, "a") as fh:
                fh.write(json.dumps(row) + "\n")
            bar.advance(1)


def same_config(text: str, config: Any) -> bool:
    """Whether the ``config.yaml`` text ``text`` holds the settings of ``config``, in any key order
    (an options class that lists its fields in another order writes the same settings)."""
    from attnas.config.yaml_loading import load_yaml

    return load_yaml(text, RunDir.CONFIG) == load_yaml(config.to_yaml(), RunDir.CONFIG)


def _supernet_strategy(config: Any, space: Any, task: Any, folder: Path, supernet_from: str | None) -> Any:
    from attnas.runs.build import build_strategy
    from attnas.pipeline import run_info

    if supernet_from:
        run = RunDir.open(supernet_from)
        strategy = build_strategy(config, space, task, run)
        if not hasattr(strategy, "load_supernet"):
            raise ConfigError(f"strategy '{config.strategy.name}' has no supernet to rank with")
        strategy.load_supernet()
        return strategy
    if (folder / RunDir.CONFIG).exists():
        if not same_config((folder / RunDir.CONFIG).read_text(), config):
            raise RunDirError(f"{folder} holds a supernet of another configuration; use another label")
        run = RunDir.open(folder)
        run.lock()
    else:
        run = RunDir.create(folder, config.to_yaml(), run_info(task.data_root, task.device))
    strategy = build_strategy(config, space, task, run)
    if not hasattr(strategy, "train_supernet"):
        raise ConfigError(f"strategy '{config.strategy.name}' trains no supernet; ranking needs a one-shot recipe")
    strategy.train_supernet()
    run.close()
    return strategy


def supernet_ranking(recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = (), out: str | Path = "",
                     archs: int = 30, seeds: int = 3, sample_seed: int = 1234, label: str = "default",
                     supernet_from: str | None = None, data_dir: str | Path | None = None) -> dict:
    """Measure the supernet's ranking quality; writes ``ranking-<label>.json``, ``.md`` and ``.png`` under ``out``.

    Args:
        recipe: A one-shot recipe (its supernet, space, task and ``retrain`` settings are used).
        overrides: ``key=value`` overrides of the recipe.
        out: The measurement folder (``archs.json``, ``standalone.jsonl``, ``supernet-<label>/``).
        archs: Architectures drawn from the prior.
        seeds: Stand-alone training seeds per architecture (0, 1, ...).
        sample_seed: Seed of the architecture draw.
        label: Names this supernet variant (its run folder and result files, under the safe
            file name :func:`ranking_file_label` makes of it: ``../x y`` becomes ``x-y``).
        supernet_from: Take the supernet of this finished search run instead of training one.
        data_dir: The data root.

    Returns:
        The summary written to ``ranking-<label>.json``.
    """
    from attnas.runs.build import build_space, build_task, check_strategy, check_task, pick_device

    config = load_config(recipe, overrides)
    space = build_space(config)
    if not hasattr(check_strategy(config, space), "train_supernet"):
        raise ConfigError(f"strategy '{config.strategy.name}' trains no supernet; ranking needs a one-shot recipe")
    task = build_task(config, resolve_data_root(data_dir), pick_device("cpu"))
    check_task(config, space, task)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    drawn = sample_architectures(space, archs, sample_seed)
    keys = [a.key() for a in drawn]
    arch_file = out / "archs.json"
    if arch_file.exists():
        if json.loads(arch_file.read_text())["keys"] != keys:
            raise RunDirError(f"{out} was measured on other architectures (another space, count or seed); "
                              f"use another folder")
    else:
        atomic_write_json(arch_file, {"keys": keys, "archs": [a.choices for a in drawn], "sample_seed": sample_seed})

    name = ranking_file_label(label)
    strategy = _supernet_strategy(config, space, task, out / f"supernet-{name}", supernet_from)
    with progress("supernet scores", len(drawn)) as bar:
        scores = []
        for a in drawn:
            scores.append(strategy.score(a))
            bar.advance(1)

    train = replace(config.retrain, init="scratch")
    done_file = out / "standalone.jsonl"
    done = _train_standalone(space, task, train, drawn, keys, seeds, done_file)

    rows = []
    for i, a in enumerate(drawn):
        runs = [done[(keys[i], k)] for k in range(seeds)]
        vals, tests = [r["val"] for r in runs], [r["test"] for r in runs]
        rows.append({"index": i, "arch": space.describe(a), "supernet": scores[i],
                     "val_mean": statistics.fmean(vals), "val_std": statistics.pstdev(vals),
                     "test_mean": statistics.fmean(tests), "test_std": statistics.pstdev(tests)})
    sup = [r["supernet"] for r in rows]
    top = max(range(len(rows)), key=lambda i: sup[i])
    best_val = max(range(len(rows)), key=lambda i: rows[i]["val_mean"])
    summary = {
        "recipe": config.name, "overrides": list(overrides), "label": label, "archs": len(rows), "seeds": seeds,
        "sample_seed": sample_seed, "supernet_from": supernet_from,
        "val": rank_correlations(sup, [r["val_mean"] for r in rows]),
        "test": rank_correlations(sup, [r["test_mean"] for r in rows]),
        "supernet_top1": {"arch": rows[top]["arch"], "val_mean": rows[top]["val_mean"],
                          "test_mean": rows[top]["test_mean"],
                          "val_rank": 1 + sorted((r["val_mean"] for r in rows), reverse=True).index(rows[top]["val_mean"])},
        "standalone_best": {"arch": rows[best_val]["arch"], "val_mean": rows[best_val]["val_mean"],
                            "test_mean": rows[best_val]["test_mean"]},
        "rows": rows,
    }
    atomic_write_json(out / f"ranking-{name}.json", summary)
    plot_ranking(summary, out / f"ranking-{name}.png")
    atomic_write_text(out / f"ranking-{name}.md", ranking_markdown(summary))
    return summary


def ranking_file_label(label: str) -> str:
    """``label`` as one safe file-name part (no path separator, not ``.`` or ``..``;
    :func:`~attnas.runs.run_dir.run_folder_name`), so that result files stay in their folder."""
    return run_folder_name(label)


def _coefficient(value: float, p: float | None = None) -> str:
    """A rank correlation as printed: three decimals (with its p-value), or why it is
    undefined (``scipy`` gives NaN when one of the two score lists is constant)."""
    if math.isnan(value):
        return "undefined (one of the two score lists is constant)"
    return f"{value:.3f}" + (f" (p {p:.2g})" if p is not None else "")


def ranking_markdown(summary: dict) -> str:
    """A short Markdown summary of a ranking measurement."""
    v, t = summary["val"], summary["test"]
    top, best = summary["supernet_top1"], summary["standalone_best"]
    return (f"# Supernet ranking: {summary['recipe']} ({summary['label']})\n\n"
            f"{summary['archs']} architectures from the prior, {summary['seeds']} stand-alone seeds each.\n\n"
            f"| against stand-alone | Kendall's tau | Spearman's rho |\n|---|---|---|\n"
            f"| validation | {_coefficient(v['kendall_tau'], v['kendall_p'])} | {_coefficient(v['spearman_rho'])} |\n"
            f"| test | {_coefficient(t['kendall_tau'], t['kendall_p'])} | {_coefficient(t['spearman_rho'])} |\n\n"
            f"The supernet's best: `{top['arch']}`, stand-alone val {top['val_mean']:.4f} (rank {top['val_rank']}), "
            f"test {top['test_mean']:.4f}. Best stand-alone: `{best['arch']}`, val {best['val_mean']:.4f}, "
            f"test {best['test_mean']:.4f}.\n")


def plot_ranking(summary: dict, path: Path) -> None:
    """Scatter of supernet score against mean stand-alone validation score (error bars: seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["rows"]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.errorbar([r["supernet"] for r in rows], [r["val_mean"] for r in rows], yerr=[r["val_std"] for r in rows],
                fmt="o", ms=4, alpha=0.8, capsize=2)
    ax.set_xlabel("supernet validation score (inherited weights)")
    ax.set_ylabel(f"stand-alone validation score (mean of {summary['seeds']} seeds)")
    tau, rho = summary["val"]["kendall_tau"], summary["val"]["spearman_rho"]
    ax.set_title(f"{summary['recipe']} [{summary['label']}]: Kendall tau "
                 f"{'undefined' if math.isnan(tau) else f'{tau:.2f}'}, Spearman rho "
                 f"{'undefined' if math.isnan(rho) else f'{rho:.2f}'}", fontsize=9)
    fig.tight_layout()
    try:
        atomic_write_file(path, lambda tmp: fig.savefig(tmp, dpi=120))
    finally:
        plt.close(fig)
