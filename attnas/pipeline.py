"""The Python API behind the command line: search, resume, retrain, evaluate, load a model.

A search run goes through three phases, each resumable:

1. the strategy's search (its own checkpoints), ending in ``arch.json``;
2. the final training of the found architecture with the recipe's ``retrain`` settings
   (fine-tuned from the supernet's weights when ``retrain.init: supernet`` and the
   strategy has them, else from scratch), checkpoint tag ``final``;
3. ``metrics.json`` (search metrics plus ``val_<metric>`` and ``test_<metric>``) and
   ``model.pt`` (weights, architecture and config: everything needed to rebuild it).

A strategy whose search already ends in its own final evaluation sets
``Strategy.final_training = False`` (e.g. ``graph-vae``, whose result is a trained graph
VAE and its metrics, not a network to train): phases 2 and 3 then reduce to writing its
metrics as ``metrics.json``, and such a run has no ``model.pt`` to evaluate or retrain.

Example:
    >>> from attnas import pipeline
    >>> run = pipeline.search("autoattend-digits-quick", out="runs/demo")   # doctest: +SKIP
    >>> model = pipeline.load_model("runs/demo")                           # doctest: +SKIP
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnas import __version__, _registry, distributed
from attnas.arch import Arch, load_arch
from attnas.config import RunConfig, TrainConfig, config_from_dict, load_config, to_mapping
from attnas.data.root import resolve_data_root
from attnas.errors import ConfigError, RunDirError, UnsupportedError
from attnas.parallel import Executor, RunSpec, SequentialExecutor, make_executor, worker_cached
from attnas.rng import seed_everything
from attnas.runs import RunDir, load_checkpoint_file, save_checkpoint_file
from attnas.train import fit


def pick_device(device: str | None) -> torch.device:
    """``auto`` (CUDA when available), ``cpu``, ``cuda`` or ``cuda:N``."""
    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"--device: {device!r} is not a device (use auto, cpu or cuda)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: CUDA is not available on this machine")
    return dev


def build_task(config: RunConfig, data_root: Path, device: torch.device) -> Any:
    """The task a config describes, with its data loaded and moved to ``device``."""
    cls = _registry.get("task", config.task.name)
    return cls(config.task.options, data_root).to(device)


def build_space(config: RunConfig) -> Any:
    """The space a config describes."""
    return _registry.get("space", config.space.name)(config.space.options)


def build_strategy(config: RunConfig, space: Any, task: Any, run: RunDir) -> Any:
    """The strategy a config describes (refusing a space it cannot drive)."""
    cls = _registry.get("strategy", config.strategy.name)
    return cls(config.strategy.options, space, task, run, seed=config.seed)


def _default_out(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{config.name}-{stamp}"


def _run_info(data_root: Path, device: torch.device, executor: Executor | None = None,
              dist: distributed.DistContext | None = None) -> dict:
    info = {"attnas_version": __version__, "data_root": str(data_root), "device": str(device),
            "command": " ".join(sys.argv), "torch": torch.__version__, "pid": os.getpid()}
    info.update((executor or SequentialExecutor()).describe())
    info["world_size"] = dist.world_size if dist is not None else 1
    return info


def search(recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = (), out: str | Path | None = None,
           data_dir: str | Path | None = None, seed: int | None = None, device: str | None = None,
           workers: int | None = None, ray_address: str | None = None) -> RunDir:
    """Run a search from a recipe into a new run directory.

    Under ``torchrun`` (``WORLD_SIZE > 1``) the supernet training is data-parallel over
    the processes and rank 0 alone writes the run directory (:mod:`attnas.distributed`).

    Args:
        recipe: A shipped recipe name, a YAML path or a mapping.
        overrides: ``key=value`` overrides (``--set``).
        out: The run directory (default ``runs/<name>-<time>``); must not hold a run yet.
        data_dir: The data root (default ``$ATTNAS_DATA``, else the per-user cache).
        seed: Overrides the recipe's seed.
        device: ``auto``, ``cpu`` or ``cuda``.
        workers: Score candidates on this many parallel Ray workers (``None``/1: in this process).
        ray_address: Use the Ray cluster at this address instead of a local Ray.

    Returns:
        The finished run directory.
    """
    config = load_config(recipe, overrides)
    if seed is not None:
        config = config.replace(seed=seed)
    dev = pick_device(device)
    data_root = resolve_data_root(data_dir)
    make_executor(workers, ray_address, check_only=True)
    dist, dev = distributed.setup(dev)
    try:
        main = dist is None or dist.is_main
        out = Path(out) if out else _default_out(config)
        if dist is not None:
            out = Path(dist.broadcast_object(str(out)))
        if main:
            RunDir.check_writable(out)
        # Build everything once before writing anything, so bad options fail with nothing written.
        space = build_space(config)
        strategy_cls = _registry.get("strategy", config.strategy.name)
        for capability in strategy_cls.requires:
            space.require(capability, config.strategy.name)
        strategy_cls.check(config.strategy.options, space)
        task = build_task(config, data_root, dev)
        space.check_task(task)
        with (make_executor(workers, ray_address) if main else SequentialExecutor()) as executor:
            run = RunDir.create(out, config.to_yaml(), _run_info(data_root, dev, executor, dist)) if main else None
            if dist is not None:
                dist.barrier()  # the run directory exists before the other ranks open it
                run = run or distributed.FollowerRun(out)
            try:
                _execute(run, config, space, task, executor, data_root)
            finally:
                run.close()
    finally:
        distributed.teardown()
    return run


def resume(run_dir: str | Path, data_dir: str | Path | None = None, device: str | None = None,
           workers: int | None = None, ray_address: str | None = None) -> RunDir:
    """Continue a killed search from its checkpoints (same config, same seed).

    The workers may differ from those of the killed run: the result is the same.

    Returns:
        The finished run directory.
    """
    run = RunDir.open(run_dir)
    config = config_from_dict(run.read_config_yaml())
    info = run.read_json(RunDir.RUN) if run.exists(RunDir.RUN) else {}
    data_root = resolve_data_root(data_dir or info.get("data_root"))
    dev = pick_device(device or info.get("device"))
    make_executor(workers, ray_address, check_only=True)
    dist, dev = distributed.setup(dev)
    try:
        main = dist is None or dist.is_main
        if main:
            RunDir.check_writable(run.path)
            run.lock()
        else:
            run = distributed.FollowerRun(run.path)
        try:
            space = build_space(config)
            task = build_task(config, data_root, dev)
            with (make_executor(workers, ray_address) if main else SequentialExecutor()) as executor:
                if main:
                    run.rewind_events()
                    run.update_run_info(status="running", resumed=time.time(), **executor.describe(),
                                        world_size=dist.world_size if dist is not None else 1)
                if dist is not None:
                    dist.barrier()  # events are rewound before any rank goes on
                _execute(run, config, space, task, executor, data_root)
        finally:
            run.close()
    finally:
        distributed.teardown()
    return run


def _execute(run: RunDir, config: RunConfig, space: Any, task: Any, executor: Executor | None = None,
             data_root: Path | None = None) -> None:
    strategy = build_strategy(config, space, task, run)
    if executor is not None and executor.parallel:
        strategy.executor = executor
        strategy.spec = RunSpec(config.to_dict(), str(data_root), "cpu")
    if run.exists(RunDir.METRICS) and (run.exists(RunDir.MODEL) or not strategy.final_training):
        run.update_run_info(status="finished")
        return
    t0 = time.time()
    result = strategy.search()
    if result is None:  # a distributed rank other than 0: its part is done
        return
    space.validate(result.arch)
    run.write_text(RunDir.ARCH, result.arch.to_json() + "\n")
    run.log({"phase": "search-done", "arch": result.arch.choices, **result.metrics})
    if not strategy.final_training:  # the search ended in the strategy's own final evaluation
        run.write_json(RunDir.METRICS, {**result.metrics, "arch": space.describe(result.arch)})
        run.update_run_info(status="finished", finished=time.time(), wall_seconds_this_process=round(time.time() - t0, 2))
        return
    final = train_final(run, config, space, task, strategy, result.arch)
    metric = task.metric
    metrics = {**result.metrics, f"val_{metric}": final.val, f"test_{metric}": final.test,
               "final_epochs": final.epochs, "final_best_epoch": final.best_epoch,
               "params": sum(p.numel() for p in space.build(result.arch, task).parameters()),
               "arch": space.describe(result.arch)}
    save_model(run, config, result.arch, final.state_dict)
    run.write_json(RunDir.METRICS, metrics)
    run.update_run_info(status="finished", finished=time.time(), wall_seconds_this_process=round(time.time() - t0, 2))


def train_final(run: RunDir | None, config: RunConfig, space: Any, task: Any, strategy: Any, arch: Arch,
                train: TrainConfig | None = None, seed: int | None = None, tag: str = "final",
                desc: str = "final training") -> Any:
    """Train ``arch`` with ``train`` (default: the recipe's ``retrain``), resumably.

    Fine-tunes from the strategy's shared weights when ``train.init == 'supernet'`` and the
    strategy has them; otherwise trains from scratch.
    """
    train = train or config.retrain
    seed = config.seed if seed is None else seed
    ck = run.load_checkpoint(tag) if run is not None else None
    seed_everything(seed + 1)
    model = None
    if train.init == "supernet" and strategy is not None:
        model = strategy.initial_model(arch)
    if model is None:
        model = space.build(arch, task).to(task.device)

    def checkpoint(epoch: int, state: dict) -> None:
        run.save_checkpoint(tag, epoch, state)

    def log(ev: dict) -> None:
        if run is not None:
            run.log({"phase": tag, **ev})

    every = max(1, train.epochs // 10) if run is not None else 0
    return fit(model, task, train, seed=seed, desc=desc, log=log, checkpoint=checkpoint if run else None,
               checkpoint_every=every, resume=ck["state"] if ck else None)


def save_model(run: RunDir, config: RunConfig, arch: Arch, state_dict: dict, name: str = RunDir.MODEL) -> None:
    """Write weights plus what rebuilds the model (config, architecture), checksummed."""
    save_checkpoint_file(run.file(name), {"config": config.to_dict(), "arch": arch.to_dict(),
                                          "state_dict": state_dict, "attnas_version": __version__})


def _open_finished(run_dir: str | Path, final_model: bool = False) -> tuple[RunDir, RunConfig, Arch, Any]:
    run = RunDir.open(run_dir)
    config = config_from_dict(run.read_config_yaml())
    if final_model and not _registry.get("strategy", config.strategy.name).final_training:
        raise UnsupportedError(f"{run.path}: strategy '{config.strategy.name}' ends in its own evaluation "
                               "(metrics.json); its runs have no final model to load, evaluate or retrain")
    if not run.exists(RunDir.ARCH):
        raise RunDirError(f"{run.path} has no arch.json yet (the search has not finished; "
                          f"`attnas search --resume {run.path}` continues it)")
    space = build_space(config)
    arch = load_arch(run.file(RunDir.ARCH), space)
    return run, config, arch, space


def load_model(run_dir: str | Path, data_dir: str | Path | None = None, device: str | None = None) -> nn.Module:
    """Rebuild a run's final model (a plain ``nn.Module``) with its trained weights."""
    run, config, arch, space = _open_finished(run_dir, final_model=True)
    if not run.exists(RunDir.MODEL):
        raise RunDirError(f"{run.path} has no model.pt (the final training has not finished)")
    task = build_task(config, resolve_data_root(data_dir or _saved_root(run)), pick_device(device))
    ck = load_checkpoint_file(run.file(RunDir.MODEL))
    model = space.build(arch, task).to(task.device)
    model.load_state_dict(ck["state_dict"])
    model.eval()
    return model


def _saved_root(run: RunDir) -> str | None:
    return run.read_json(RunDir.RUN).get("data_root") if run.exists(RunDir.RUN) else None


def evaluate(run_dir: str | Path, data_dir: str | Path | None = None, device: str | None = None) -> dict:
    """Score a run's final model on its validation and test splits (writes evaluation.json)."""
    run, config, arch, space = _open_finished(run_dir, final_model=True)
    task = build_task(config, resolve_data_root(data_dir or _saved_root(run)), pick_device(device))
    model = load_model(run_dir, data_dir, device)
    metric = task.metric
    out = {f"val_{metric}": task.evaluate(model, "val"), f"test_{metric}": task.evaluate(model, "test"),
           "arch": space.describe(arch)}
    run.write_json("evaluation.json", out)
    return out


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
    results as one after the other.

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
    run, config, arch, space = _open_finished(run_dir, final_model=True)
    for o in overrides:
        if not o.startswith("retrain."):
            raise ConfigError(f"--set {o}: only retrain.* settings can change when retraining")
    if overrides:
        from attnas.config import apply_overrides

        config = config_from_dict(apply_overrides(config.to_dict(), overrides))
    make_executor(workers, ray_address, check_only=True)
    RunDir.check_writable(run.path)
    run.lock()
    try:
        dev = pick_device(device)
        data_root = resolve_data_root(data_dir or _saved_root(run))
        task = build_task(config, data_root, dev)
        name = dataset or config.task.get("dataset", "same") or "same"
        transfer = bool(dataset and dataset != config.task.get("dataset"))
        if transfer:
            task = task.with_dataset(dataset)
            init = "scratch"
        train = config.retrain
        if init:
            from dataclasses import replace

            train = replace(train, init=init)
        n = seeds or train.seeds
        folder = run.path / "retrain" / str(name) / train.init
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
                                 dataset if transfer else None, train, n)
                rows = executor.imap(retrain_seed, todo, job)
            else:
                strategy = build_strategy(config, space, task, run) if train.init == "supernet" else None
                rows = (_retrain_row(config, space, task, strategy, arch, train, k, n) for k in todo)
            for k, row in zip(todo, rows):
                run.write_json(str((folder / f"seed-{k}.json").relative_to(run.path)), row)
                done[k] = row
            if todo:
                run.update_run_info(retrain=executor.describe())
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
    res = train_final(None, config, space, task, strategy, arch, train=train, seed=config.seed + 100 + k,
                      desc=f"retrain seed {k + 1}/{n}")
    metric = task.metric
    return {"seed": k, f"val_{metric}": res.val, f"test_{metric}": res.test, "epochs": res.epochs,
            "init": train.init, "train_config": to_mapping(train)}


@dataclass(frozen=True)
class RetrainJob:
    """What a worker needs to retrain one seed (see :func:`retrain_seed`)."""

    spec: RunSpec
    run_path: str
    arch: dict
    dataset: str | None
    train: TrainConfig
    seeds: int


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
    return _retrain_row(config, space, task, strategy, Arch.from_dict(job.arch), job.train, k, job.seeds)


def check_arch_file(path: str | Path, recipe: str | Path) -> tuple[Arch, Any]:
    """Validate an architecture file against a recipe's space (``attnas check-arch``).

    Returns:
        The architecture and the space it was checked against.
    """
    space = build_space(load_config(recipe))
    return load_arch(path, space), space
