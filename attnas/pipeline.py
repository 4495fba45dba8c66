"""The Python API behind the command line: search, resume, evaluate, load a model.

A search run goes through three phases, each resumable:

1. the strategy's search (its own checkpoints), ending in ``arch.json``;
2. the final training of the found architecture with the recipe's ``retrain`` settings
   (fine-tuned from the supernet's weights when ``retrain.init: supernet`` and the
   strategy has them, else from scratch), checkpoint tag ``final``;
3. ``metrics.json`` (search metrics plus ``val_<metric>`` and ``test_<metric>``) and
   ``model.pt`` (weights, architecture, config and the task's input and output sizes:
   everything needed to rebuild it without the data; :mod:`attnas.runs.model_files`).

A strategy whose search already ends in its own final evaluation sets
``Strategy.final_training = False`` (e.g. ``graph-vae``, whose result is a trained graph
VAE and its metrics, not a network to train): phases 2 and 3 then reduce to writing its
metrics as ``metrics.json``, and such a run has no ``model.pt`` to evaluate or retrain.

Retraining a finished run with several seeds is :mod:`attnas.training.retraining`; building a
config's task, space and strategy is :mod:`attnas.runs.build`.

Example:
    >>> from attnas import pipeline
    >>> run = pipeline.search("autoattend-digits-quick", out="runs/demo")   # doctest: +SKIP
    >>> model = pipeline.load_model("runs/demo")                           # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnas import registry
from attnas._version import __version__
from attnas.config import RunConfig, TrainConfig, config_from_dict, load_config
from attnas.core.arch import Arch, load_arch
from attnas.core.errors import CheckpointError, RunDirError, UnsupportedError
from attnas.data.root import resolve_data_root
from attnas.export.export_folders import EXPORT_INFO, read_export_folder
from attnas.runs.build import build_space, build_strategy, build_task, check_strategy, check_task, pick_device
from attnas.runs.model_files import load_model_file, model_payload, save_model_file, saved_task
from attnas.runs.resumable_phase import ResumablePhase
from attnas.runs.rng import seed_everything
from attnas.runs.run_dir import RunDir, run_folder_name
from attnas.runtime import run_environment
from attnas.scale import distributed
from attnas.scale.parallel import Executor, RunSpec, SequentialExecutor, make_executor
from attnas.training.train import fit


def _default_out(config: RunConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{run_folder_name(config.name)}-{stamp}"


def run_info(data_root: Path, device: torch.device, executor: Executor | None = None,
             dist: distributed.DistContext | None = None) -> dict:
    """What ``run.json`` records about the process that creates a run directory (with what
    a resume compares: :func:`attnas.runtime.run_environment.describe`)."""
    info = {**run_environment.describe(), "data_root": str(data_root), "device": str(device),
            "command": " ".join(sys.argv), "pid": os.getpid()}
    info.update((executor or SequentialExecutor()).describe())
    info["world_size"] = dist.world_size if dist is not None else 1
    return info


def search(recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = (), out: str | Path | None = None,
           data_dir: str | Path | None = None, seed: int | None = None, device: str | None = None,
           workers: int | None = None, ray_address: str | None = None) -> RunDir:
    """Run a search from a recipe into a new run directory.

    Under ``torchrun`` (``WORLD_SIZE > 1``) the supernet training is data-parallel over
    the processes and rank 0 alone writes the run directory (:mod:`attnas.scale.distributed`).

    Args:
        recipe: A shipped recipe name, a YAML path or a mapping.
        overrides: ``key=value`` overrides (``--set``).
        out: The run directory, new or empty (default ``runs/<name>-<time>``, the recipe's
            name made a safe folder name by :func:`~attnas.runs.run_dir.run_folder_name`).
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
        out = Path(out) if out else _default_out(config)
        if dist is not None:
            out = Path(dist.broadcast_object(str(out)))
        distributed.on_main(dist, RunDir.check_new, out)  # when it fails, every rank stops with its line
        # Build and check everything once before writing anything, so bad inputs fail with nothing written.
        space = build_space(config)
        check_strategy(config, space)
        task = build_task(config, data_root, dev)
        check_task(config, space, task)
        run = _execute_on_every_rank(
            dist, workers, ray_address, out, config, space, task, data_root,
            start=lambda executor: RunDir.create(out, config.to_yaml(), run_info(data_root, dev, executor, dist)))
    finally:
        distributed.teardown()
    return run


def _execute_on_every_rank(dist: distributed.DistContext | None, workers: int | None, ray_address: str | None,
                           path: Path, config: RunConfig, space: Any, task: Any, data_root: Path,
                           start: Callable[[Executor], RunDir]) -> RunDir:
    """The end that :func:`search` and :func:`resume` share: run the strategy on every rank.

    Rank 0 opens the executor (the Ray workers asked for) and makes its run directory ready
    with ``start(executor)`` (a new one, or the killed one rewound); the other ranks score in
    their own process, wait for rank 0 and read the run directory at ``path`` through a
    :class:`~attnas.scale.distributed.FollowerRun`. Every rank then executes the run,
    recording how it stops (:func:`recording_outcome`), and closes its run directory.

    Returns:
        This rank's run directory (closed).
    """
    main = dist is None or dist.is_main
    with (make_executor(workers, ray_address) if main else SequentialExecutor()) as executor:
        run = start(executor) if main else None
        if dist is not None:
            dist.barrier()  # the run directory is ready (created, or its events rewound) before any rank goes on
            run = run or distributed.FollowerRun(path)
        try:
            with recording_outcome(run):
                _execute(run, config, space, task, executor, data_root)
        finally:
            run.close()
    return run


@contextlib.contextmanager
def recording_outcome(run: RunDir | Any) -> Iterator[None]:
    """Record in ``run.json`` how a run that stops with an exception stopped.

    Ctrl-C marks it ``"status": "interrupted"``; any other exception ``"failed"``, with
    ``"error": "<type>: <message>"``. Either way the checkpoints stay and ``attnas search
    --resume`` continues the run. The exception is re-raised with the run directory as
    its ``attnas_run_dir`` attribute, which the command line names in its one-line error.

    Args:
        run: The run directory (a distributed follower's stand-in records nothing).
    """
    try:
        yield
    except (KeyboardInterrupt, Exception) as exc:
        if isinstance(run, RunDir):
            status = {"status": "interrupted"} if isinstance(exc, KeyboardInterrupt) else {
                "status": "failed", "error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
            with contextlib.suppress(Exception):  # e.g. a full disk: the exception raised says why
                run.update_run_info(**status, stopped=time.time())
            with contextlib.suppress(AttributeError, TypeError):
                exc.attnas_run_dir = str(run.path)
        raise


def resume(run_dir: str | Path, data_dir: str | Path | None = None, device: str | None = None,
           workers: int | None = None, ray_address: str | None = None, force: bool = False) -> RunDir:
    """Continue a killed search from its checkpoints (same config, same seed).

    The workers may differ from those of the killed run: the result is the same. The torch
    threads, compiled kernels and torch and attnas versions must be those ``run.json``
    recorded (:mod:`attnas.runtime.run_environment`), since each can change the result (a finished
    run, which a resume leaves as it is, is not checked).

    Args:
        run_dir: The run directory.
        data_dir: The data root (default: the one the run was made with).
        device: ``auto``, ``cpu`` or ``cuda`` (default: the run's).
        workers: Score candidates on this many parallel Ray workers.
        ray_address: Use the Ray cluster at this address.
        force: Resume even when threads, kernels or versions differ (``run.json`` records it).

    Returns:
        The finished run directory.

    Raises:
        RunDirError: When this process differs from the run's and ``force`` is not given.
    """
    run = RunDir.open(run_dir)
    config = config_from_dict(run.read_config_yaml())
    info = run.read_json(RunDir.RUN) if run.exists(RunDir.RUN) else {}
    if run.exists(RunDir.METRICS) and not isinstance(run.read_json(RunDir.METRICS), dict):  # read before any write
        raise RunDirError(f"{run.file(RunDir.METRICS)} does not hold a JSON object of metrics")
    environment = run_environment.describe()
    if not run.exists(RunDir.METRICS):  # a finished run resumes to nothing: nothing to compare
        environment = run_environment.check_resume(run.path, info, environment, force=force)
    data_root = resolve_data_root(data_dir or info.get("data_root"))
    dev = pick_device(device or info.get("device"))
    make_executor(workers, ray_address, check_only=True)
    dist, dev = distributed.setup(dev)
    try:
        def claim() -> None:
            RunDir.check_writable(run.path)
            run.lock()
            run.remove_stale_temporaries()

        def reopen(executor: Executor) -> RunDir:
            run.rewind_events()
            run.update_run_info(status="running", resumed=time.time(), **environment, **executor.describe(),
                                world_size=dist.world_size if dist is not None else 1)
            return run

        distributed.on_main(dist, claim)  # when it fails, every rank stops with its line
        try:
            space = build_space(config)
            task = build_task(config, data_root, dev)
            return _execute_on_every_rank(dist, workers, ray_address, run.path, config, space, task, data_root,
                                          start=reopen)
        finally:
            run.close()  # rank 0's lock, also when the space or the task fails to build
    finally:
        distributed.teardown()


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
    if not run.events("search-done"):  # a run resumed in its final phase logged it before the kill
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
    save_model(run, config, result.arch, final.state_dict, task_info=task.info)
    run.write_json(RunDir.METRICS, metrics)
    run.update_run_info(status="finished", finished=time.time(), wall_seconds_this_process=round(time.time() - t0, 2))


def train_final(run: RunDir | None, config: RunConfig, space: Any, task: Any, strategy: Any, arch: Arch,
                train: TrainConfig | None = None, seed: int | None = None, tag: str = "final",
                desc: str = "final training") -> Any:
    """Train ``arch`` with ``train`` (default: the recipe's ``retrain``), resumably.

    Fine-tunes from the strategy's shared weights, at ``train.finetune_lr`` when it is set,
    when ``train.init == 'supernet'`` and the strategy has them; otherwise trains from scratch
    at ``train.lr``.
    """
    train = train or config.retrain
    seed = config.seed if seed is None else seed
    phase = ResumablePhase(run, tag, elapsed_key=None, done_key=None)
    phase.load()
    seed_everything(seed + 1)
    model = None
    if train.init == "supernet" and strategy is not None:
        model = strategy.initial_model(arch)
    if model is None:
        model = space.build(arch, task).to(task.device)
    elif train.finetune_lr is not None:
        train = replace(train, lr=train.finetune_lr)

    def log(ev: dict) -> None:
        if run is not None:
            run.log({"phase": tag, **ev})

    every = max(1, train.epochs // 10) if run is not None else 0
    return fit(model, task, train, seed=seed, desc=desc, log=log, phase=phase, checkpoint_every=every)


def save_model(run: RunDir, config: RunConfig, arch: Arch, state_dict: dict, name: str = RunDir.MODEL,
               task_info: Any = None) -> None:
    """Write ``model.pt``: weights plus what rebuilds the model (config, architecture, the task's
    :class:`~attnas.tasks.base.TaskInfo`) as plain data, its SHA-256 beside it
    (:mod:`attnas.runs.model_files`)."""
    save_model_file(run.file(name), model_payload(config.to_dict(), arch.to_dict(), state_dict, task_info,
                                                  __version__))


def open_finished(run_dir: str | Path, final_model: bool = False) -> tuple[RunDir, RunConfig, Arch, Any]:
    """Open a run whose search has finished.

    Args:
        run_dir: The run directory.
        final_model: Refuse runs whose strategy trains no final model (it ends in its own
            evaluation).

    Returns:
        The run directory, its config, its found architecture and its space.

    Raises:
        UnsupportedError: With ``final_model``, when the strategy trains no final model.
        RunDirError: When the search has not written ``arch.json`` yet.
    """
    run = RunDir.open(run_dir)
    config = config_from_dict(run.read_config_yaml())
    if final_model and not registry.get("strategy", config.strategy.name).final_training:
        raise UnsupportedError(f"{run.path}: strategy '{config.strategy.name}' ends in its own evaluation "
                               "(metrics.json); its runs have no final model to load, evaluate or retrain")
    if not run.exists(RunDir.ARCH):
        raise RunDirError(f"{run.path} has no arch.json yet (the search has not finished; "
                          f"`attnas search --resume {run.path}` continues it)")
    space = build_space(config)
    arch = load_arch(run.file(RunDir.ARCH), space)
    return run, config, arch, space


def load_model(path: str | Path, data_dir: str | Path | None = None, device: str | None = None) -> nn.Module:
    """Rebuild a final model (a plain ``nn.Module`` in eval mode) with its trained weights.

    No training data is needed: ``model.pt`` stores the input and output sizes and the other
    task facts the space's ``build()`` reads. Only a ``model.pt`` written before attnas stored
    them (``ATTNAS-CKPT-1`` header) rebuilds its task from the data (``data_dir``, default the
    run's data root).

    Args:
        path: A run directory, its ``model.pt`` (or a copy of it anywhere), or a folder written
            by ``attnas export --format pytorch|safetensors``.
        data_dir: The data root, for old ``model.pt`` files only.
        device: ``auto``, ``cpu`` or ``cuda`` (default ``auto``).

    Raises:
        RunDirError: When the run has no model yet.
        CheckpointError: When the file is corrupt or fails its checksum.
    """
    path = Path(path)
    if path.is_dir() and (path / EXPORT_INFO).exists():
        payload, load_weights = read_export_folder(path)
        return model_from_payload(payload, device=device, load_weights=load_weights)
    if path.is_dir():
        run, config, arch, _ = open_finished(path, final_model=True)
        if not run.exists(RunDir.MODEL):
            raise RunDirError(f"{run.path} has no model.pt (the final training has not finished)")
        payload = load_model_file(run.file(RunDir.MODEL))
        if payload.get("arch") is not None and _canonical(payload["arch"]) != _canonical(arch.to_dict()):
            raise CheckpointError(f"{run.file(RunDir.MODEL)} is the model of another architecture than this run's "
                                  f"arch.json (copied from another run?)")
        saved_space = (payload.get("config") or {}).get("space")
        if saved_space is not None and _canonical(saved_space) != _canonical(config.to_dict()["space"]):
            raise CheckpointError(f"{run.file(RunDir.MODEL)} does not fit this run's network (copied from another "
                                  f"run?): its space section differs from config.yaml's")
        return model_from_payload(payload, data_dir, device, run)
    return model_from_payload(load_model_file(path), data_dir, device)


def model_from_payload(payload: dict, data_dir: str | Path | None = None, device: str | None = None,
                       run: RunDir | None = None, load_weights: Any = None) -> nn.Module:
    """The model a ``model.pt`` payload describes, with its weights, in eval mode.

    Args:
        payload: What :func:`attnas.runs.model_files.load_model_file` returned.
        data_dir: The data root, for a payload without stored task facts.
        device: ``auto``, ``cpu`` or ``cuda``.
        run: The run it came from (needed for a payload without stored task facts).
        load_weights: Puts the weights into the built model instead of ``payload["state_dict"]``
            (e.g. from a safetensors file).
    """
    config = config_from_dict(payload["config"])
    space = build_space(config)
    arch = Arch.from_dict(payload["arch"], source="model.pt arch")
    space.validate(arch)
    task = saved_task(payload)
    if task is None:
        if run is None:
            raise RunDirError("this model.pt was written before attnas stored its task's sizes; load it through its "
                              "run directory (attnas.load_model(RUN_DIR)) with the run's data present")
        task = run_task(run, config, data_dir, device)
    else:
        task.to(pick_device(device))
    model = space.build(arch, task)
    try:
        if load_weights is not None:
            load_weights(model)
        else:
            model.load_state_dict(payload["state_dict"])
    except (RuntimeError, TypeError, AttributeError) as exc:
        where = run.file(RunDir.MODEL) if run is not None else "the model file"
        raise CheckpointError(f"{where} does not fit this run's network (copied from another run?): "
                              f"{str(exc).splitlines()[0][:200]}") from None
    return model.to(task.device).eval()


def _canonical(doc: Any) -> str:
    """``doc`` as sorted JSON (tuples and lists alike), to compare architectures."""
    return json.dumps(doc, sort_keys=True, default=str)


def saved_data_root(run: RunDir) -> str | None:
    """The data root the run was created with (from ``run.json``), if it recorded one."""
    return run.read_json(RunDir.RUN).get("data_root") if run.exists(RunDir.RUN) else None


def run_task(run: RunDir, config: RunConfig, data_dir: str | Path | None = None, device: str | None = None) -> Any:
    """The task of a run, on ``data_dir`` (default: the data root the run was created with) and
    ``device`` (a ``--device`` value)."""
    return build_task(config, resolve_data_root(data_dir or saved_data_root(run)), pick_device(device))


def evaluate(run_dir: str | Path, data_dir: str | Path | None = None, device: str | None = None) -> dict:
    """Score a run's final model on its validation and test splits (writes evaluation.json)."""
    run, config, arch, space = open_finished(run_dir, final_model=True)
    task = run_task(run, config, data_dir, device)
    model = load_model(run_dir, data_dir, device)
    metric = task.metric
    out = {f"val_{metric}": task.evaluate(model, "val"), f"test_{metric}": task.evaluate(model, "test"),
           "arch": space.describe(arch)}
    run.write_json("evaluation.json", out)
    return out


def check_arch_file(path: str | Path, recipe: str | Path) -> tuple[Arch, Any]:
    """Validate an architecture file against a recipe's space (``attnas check-arch``).

    Returns:
        The architecture and the space it was checked against.
    """
    space = build_space(load_config(recipe))
    return load_arch(path, space), space


def search_or_resume(run_dir: str | Path, recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = (),
                     seed: int | None = None, data_dir: str | Path | None = None,
                     device: str | None = None) -> RunDir:
    """Bring the search in ``run_dir`` to its end: nothing to do when it has finished,
    :func:`resume` when it was killed, else :func:`search` into it (sweeps and comparisons
    run their rows this way, so running them again continues them)."""
    run_dir = Path(run_dir)
    if (run_dir / RunDir.METRICS).exists() and (run_dir / RunDir.MODEL).exists():
        return RunDir(run_dir)
    if (run_dir / RunDir.CONFIG).exists():
        return resume(run_dir, data_dir=data_dir, device=device)
    return search(recipe, overrides, out=run_dir, data_dir=data_dir, seed=seed, device=device)

