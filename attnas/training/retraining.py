"""Retraining a finished run's architecture with several seeds, optionally on another dataset.

Example:
    >>> from attnas.training.retraining import retrain
    >>> summary = retrain("runs/demo", seeds=3)   # doctest: +SKIP
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from attnas.config import RunConfig, TrainConfig, apply_overrides, check_seeds, config_from_dict, to_mapping
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError, RunDirError
from attnas.data.root import resolve_data_root
from attnas.pipeline import open_finished, saved_data_root, train_final
from attnas.reporting.progress import current_label, labelled
from attnas.runs.build import build_strategy, build_task, check_retraining, pick_device
from attnas.runs.run_dir import RunDir
from attnas.scale.parallel import RunSpec, SequentialExecutor, make_executor, worker_cached


def retrain(run_dir: str | Path, dataset: str | None = None, seeds: int | None = None,
            data_dir: str | Path | None = None, device: str | None = None, init: str | None = None,
            overrides: list[str] | tuple[str, ...] = (), workers: int | None = None,
            ray_address: str | None = None) -> dict:
    """Retrain a run's architecture with several seeds (optionally on another dataset).

    Each seed's result is written to ``retrain/<dataset>/<init>/seed-<k>.json`` as it
    finishes, with the training settings it used, so an interrupted retrain continues
    with the seeds left (and results made with other settings are never mixed in: they
    are refused with an error naming the folder). The summary (mean and standard
    deviation) goes to ``retrain/<dataset>/<init>/summary.json`` and into
    ``metrics.json`` as ``retrain_<dataset>_<init>_test_<metric>_mean`` etc.

    The seeds are independent: with ``workers`` they train in parallel on Ray (each
    worker rebuilds the task and, for ``init: supernet``, reads the supernet checkpoint
    from the run directory, which must be visible to the workers), with the same
    results as one after the other. A seed whose worker died is re-run; when one fails
    for good, the seeds that finished are written before its error is raised.

    Args:
        run_dir: A finished run.
        dataset: Transfer target (e.g. ``sst2`` for an SST-5 search); default the run's own.
        seeds: Number of seeds (default ``retrain.seeds`` of the recipe).
        data_dir: The data root.
        device: Where to train (Ray workers train on CPU).
        init: ``supernet`` or ``scratch`` (default: the recipe's; transfer always uses scratch).
        overrides: ``retrain.*`` overrides, e.g. ``retrain.epochs=300``.
        workers: Parallel Ray workers (``None``/1: in this process).
        ray_address: A Ray cluster address.
    """
    if seeds is not None:
        check_seeds(seeds)
    run, config, arch, space = open_finished(run_dir, final_model=True)
    for o in overrides:
        if not o.startswith("retrain."):
            raise ConfigError(f"--set {o}: only retrain.* settings can change when retraining")
    if overrides:
        config = config_from_dict(apply_overrides(config.to_dict(), overrides))
    make_executor(workers, ray_address, check_only=True)
    RunDir.check_writable(run.path)
    run.lock()
    try:
        dev = pick_device(device)
        data_root = resolve_data_root(data_dir or saved_data_root(run))
        task = build_task(config, data_root, dev)
        name = dataset or config.task.get("dataset", "same") or "same"
        transfer = bool(dataset and dataset != config.task.get("dataset"))
        if transfer:
            task = task.with_dataset(dataset)
            init = "scratch"
        train = config.retrain
        if init:
            train = replace(train, init=init)
        check_retraining(train.init, task)
        n = seeds or train.seeds
        folder = run.path / "retrain" / str(name) / train.init
        run.remove_stale_temporaries(folder)  # of a retrain killed while it wrote a result
        metric = task.metric
        settings = to_mapping(train)
        done: dict[int, dict] = {}
        for k in range(n):
            f = folder / f"seed-{k}.json"
            if f.exists():
                row = run.read_json(str(f.relative_to(run.path)))
                if row.get("train_config") != settings:
                    raise RunDirError(f"{folder} holds results made with other retrain settings; "
                                      f"remove that folder to retrain with the new ones")
                done[k] = row
        todo = [k for k in range(n) if k not in done]
        folder.mkdir(parents=True, exist_ok=True)
        with (make_executor(workers, ray_address) if len(todo) > 1 else SequentialExecutor()) as executor:
            if executor.parallel:
                job = RetrainJob(RunSpec(config.to_dict(), str(data_root), "cpu"), str(run.path), arch.to_dict(),
                                 dataset if transfer else None, train, n, current_label())
                outcomes = executor.imap_outcomes(retrain_seed, todo, job)
            else:
                strategy = build_strategy(config, space, task, run) if train.init == "supernet" else None
                outcomes = ((_retrain_row(config, space, task, strategy, arch, train, k, n), None) for k in todo)
            failed = None
            for k, (row, error) in zip(todo, outcomes):
                if error is not None:  # the seeds that finished after it are still written
                    failed = failed or error
                    continue
                run.write_json(str((folder / f"seed-{k}.json").relative_to(run.path)), row)
                done[k] = row
            if todo:
                run.update_run_info(retrain=executor.describe())
            if failed is not None:
                raise failed
        results = [done[k] for k in range(n)]
        summary = {"dataset": name, "seeds": n, "init": train.init, "train_config": settings}
        for split in ("val", "test"):
            vals = [r[f"{split}_{metric}"] for r in results]
            summary[f"{split}_{metric}_mean"] = statistics.fmean(vals)
            summary[f"{split}_{metric}_std"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
        summary["per_seed"] = results
        run.write_json(str((folder / "summary.json").relative_to(run.path)), summary)
        if run.exists(RunDir.METRICS):
            metrics = run.read_json(RunDir.METRICS)
            for k2, v in summary.items():
                if k2.endswith(("_mean", "_std")):
                    metrics[f"retrain_{name}_{train.init}_{k2}"] = v
            metrics[f"retrain_{name}_{train.init}_seeds"] = n
            run.write_json(RunDir.METRICS, metrics)
        return summary
    finally:
        run.close()


def _retrain_row(config: RunConfig, space: Any, task: Any, strategy: Any, arch: Arch, train: TrainConfig,
                 k: int, n: int) -> dict:
    """Train seed ``k`` of a retraining and return its result row (a function of ``k`` alone)."""
    t0 = time.perf_counter()
    task.select_split(k, retraining=True)  # split: per-seed trains seed k on split k mod S
    res = train_final(None, config, space, task, strategy, arch, train=train, seed=config.seed + 100 + k,
                      desc=f"retrain seed {k + 1}/{n}")
    metric = task.metric
    return {"seed": k, f"val_{metric}": res.val, f"test_{metric}": res.test, "epochs": res.epochs,
            "best_epoch": res.best_epoch, "init": train.init, "train_config": to_mapping(train), "seconds": round(time.perf_counter() - t0, 3)}


@dataclass(frozen=True)
class RetrainJob:
    """What a worker needs to retrain one seed (see :func:`retrain_seed`)."""

    spec: RunSpec
    run_path: str
    arch: dict
    dataset: str | None
    train: TrainConfig
    seeds: int
    label: str = ""  # what the progress lines belong to (:func:`attnas.reporting.progress.labelled`)


def retrain_seed(k: int, job: RetrainJob) -> dict:
    """Worker side of a parallel :func:`retrain`: seed ``k``'s result row."""

    def build():
        config, space, task = job.spec.build()
        if job.dataset:
            task = task.with_dataset(job.dataset)
        strategy = build_strategy(config, space, task, RunDir(job.run_path)) if job.train.init == "supernet" else None
        return config, space, task, strategy

    config, space, task, strategy = worker_cached(("retrain", job.spec.key(), job.run_path, job.dataset,
                                                   job.train.init), build)
    with labelled(job.label):
        return _retrain_row(config, space, task, strategy, Arch.from_dict(job.arch), job.train, k, job.seeds)
