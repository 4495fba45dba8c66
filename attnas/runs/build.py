"""A run's parts built from its config: the device, the task, the space and the strategy,
and the checks that refuse parts which cannot work together before a run writes anything.

Example:
    >>> from attnas.runs.build import build_space, build_task, pick_device   # doctest: +SKIP
    >>> from attnas.config import load_config                            # doctest: +SKIP
    >>> from attnas.data.root import resolve_data_root                   # doctest: +SKIP
    >>> cfg = load_config("autoattend-cora")                             # doctest: +SKIP
    >>> space = build_space(cfg)                                         # doctest: +SKIP
    >>> task = build_task(cfg, resolve_data_root(), pick_device("cpu"))  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from attnas import registry
from attnas.config import RunConfig
from attnas.core.errors import ConfigError, DataError
from attnas.runs.rng import first_batch, rng_state, set_rng_state
from attnas.runs.run_dir import RunDir
from attnas.runtime.extras import require


def use_kernels() -> bool:
    """Import the optional acceleration package :mod:`attnas.kernels` (its compiled kernels
    then replace eager operations where they apply), unless ``ATTNAS_NO_KERNELS`` is set or
    the package is absent. The one place that turns the kernels on for runs; returns whether
    they are on."""
    if os.environ.get("ATTNAS_NO_KERNELS", "") not in ("", "0"):
        return False
    try:
        import attnas.kernels  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name != "attnas.kernels":
            raise
        return False
    return True


use_kernels()


def pick_device(device: str | None) -> torch.device:
    """The torch device a ``--device`` value names.

    Args:
        device: ``auto`` (CUDA when available; also ``None`` and ``""``), ``cpu``, ``cuda`` or
            ``cuda:N``.

    Raises:
        ConfigError: When ``device`` is not a device, or names CUDA on a machine without it.
    """
    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"--device: {device!r} is not a device (use auto, cpu or cuda)") from None
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError(f"--device {device}: attnas runs on cpu or cuda, not {dev.type}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {device}: CUDA is not available on this machine")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev


def build_task(config: RunConfig, data_root: Path, device: torch.device) -> Any:
    """The task a config describes, with its data loaded and moved to ``device``."""
    cls = registry.get("task", config.task.name)
    task = cls(config.task.options, data_root).to(device)
    task.select_split(config.seed)
    return task


def build_space(config: RunConfig) -> Any:
    """The space a config describes."""
    return registry.get("space", config.space.name)(config.space.options)


def check_strategy(config: RunConfig, space: Any) -> type:
    """Refuse a space or options the config's strategy cannot use (before any data is loaded).

    Returns:
        The strategy class.

    Raises:
        AttnasError: Naming the missing capability or the bad option.
    """
    cls = registry.get("strategy", config.strategy.name)
    require(getattr(cls, "needs", ()), f"strategy '{config.strategy.name}'")
    for capability in cls.requires:
        space.require(capability, config.strategy.name)
    cls.check(config.strategy.options, space)
    return cls


def check_task(config: RunConfig, space: Any, task: Any) -> None:
    """Refuse a loaded task the space or the strategy cannot use, before anything is written.

    Besides the space's and the strategy's own checks, a strategy whose result is trained
    afterwards needs a batch of every split (the final training scores on ``train``,
    ``val`` and ``test``); one batch of each is drawn, leaving the random generators as
    they were.

    Raises:
        AttnasError: Naming the problem.
    """
    cls = registry.get("strategy", config.strategy.name)
    space.check_task(task)
    cls.check_task(config.strategy.options, space, task)
    info = task.info
    if info.kind in ("node", "text", "image", "sequence") and not info.multilabel and info.num_classes < 2:
        raise DataError(f"task '{task.name}': the data holds {info.num_classes} class; a classifier needs at least two")
    check_model_fits(config, space, task, cls.requires)
    if cls.final_training:
        for split in ("train", "val", "test"):
            if first_batch(task, split) is None:
                raise DataError(f"task '{task.name}': the {split} split is empty (the found architecture is "
                                f"trained on train and scored on val and test)")


def check_retraining(init: str, task: Any) -> None:
    """Refuse retraining from the search's shared weights where retraining seeds change the split.

    With ``split: per-seed`` (:class:`~attnas.tasks.heterophilous.FixedSplitsTask`) the
    supernet was trained on the training nodes of one split, and retraining seed ``k`` tests
    on split ``k``, whose test nodes are training nodes of the other: fine-tuning from the
    supernet would test on nodes its weights were fitted to.

    Raises:
        ConfigError: For ``init: supernet`` on such a task.
    """
    if init == "supernet" and getattr(task, "splits_per_seed", False):
        raise ConfigError("retrain.init: supernet would fine-tune weights trained on one split's training nodes and "
                          "test on another split's, which overlap; use retrain.init=scratch with task.split: per-seed "
                          "(or a fixed task.split)")


def machine_memory(device: torch.device) -> int:
    """Bytes of memory on ``device``: the GPU's, or the machine's RAM for the CPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


#: Architectures sampled to find the largest network of a space without a supernet.
SIZE_SAMPLES = 8


def check_model_fits(config: RunConfig, space: Any, task: Any, requires: tuple[str, ...] = ()) -> None:
    """Refuse widths and depths whose network cannot be trained in this machine's memory.

    The network the strategy trains first (the supernet of a one-shot strategy, the relaxed
    network of a differentiable one, else the largest of :data:`SIZE_SAMPLES` sampled
    architectures) is built on torch's
    ``meta`` device, which allocates nothing, and its parameters counted. Training keeps
    about four copies of them (weights, gradients and Adam's two moments), so more than a
    quarter of the memory of the device in parameters cannot train. A space whose networks
    cannot be built on the meta device is not checked here. The random generators, and the
    attributes of the task and the space (which building may cache), are left as they were.

    Raises:
        ConfigError: ``space: a network of this space has N parameters ...``.
    """
    import random

    def build() -> list[torch.nn.Module]:
        if "one-shot" in requires:
            return [space.supernet(task)]
        if "relaxed" in requires:
            return [space.relaxed(task)]
        rng = random.Random(0)
        return [space.build(space.sample(rng), task) for _ in range(SIZE_SAMPLES)]

    state, kept = rng_state(), [(obj, dict(vars(obj))) for obj in (space, task)]
    try:
        with torch.device("meta"):
            nbytes = max(sum(p.numel() * p.element_size() for p in m.parameters()) for m in build())
    except RuntimeError as exc:
        if "overflow" not in str(exc):  # a network the meta device cannot build is checked when it is built
            return
        nbytes = 2**63  # a tensor of more than 2**63 bytes
    except Exception:  # noqa: BLE001 - as above
        return
    finally:  # what building cached on the task or the space (on the meta device) is dropped
        set_rng_state(state)
        for obj, attributes in kept:
            vars(obj).clear()
            vars(obj).update(attributes)
    device = task.device if isinstance(getattr(task, "device", None), torch.device) else torch.device("cpu")
    memory = machine_memory(device)
    if 4 * nbytes > memory:
        where = "GPU" if device.type == "cuda" else "machine"
        over = "more than " if nbytes >= 2**63 else ""
        count = f"{over}{nbytes / 4:.3g}"  # float32 parameters
        raise ConfigError(f"space: its network has {count} parameters, {over}{4 * nbytes / 2**30:.3g} GiB to train "
                          f"(weights, gradients, optimiser state), more than this {where}'s {memory / 2**30:.3g} GiB; "
                          f"lower its sizes ({', '.join(_width_keys(config)) or 'widths, layers'})")


def _width_keys(config: RunConfig) -> list[str]:
    """The space's integer options above 1000, as ``space.<key>=<value>`` (the likely culprits)."""
    from dataclasses import fields, is_dataclass

    opts = config.space.options
    if not is_dataclass(opts):
        return []
    return [f"space.{f.name}={getattr(opts, f.name)}" for f in fields(opts)
            if isinstance(getattr(opts, f.name), int) and not isinstance(getattr(opts, f.name), bool)
            and getattr(opts, f.name) > 1000]


def build_strategy(config: RunConfig, space: Any, task: Any, run: RunDir) -> Any:
    """The strategy a config describes (refusing a space it cannot drive)."""
    cls = registry.get("strategy", config.strategy.name)
    return cls(config.strategy.options, space, task, run, seed=config.seed)
