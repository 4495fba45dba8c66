"""A run's parts built from its config: the device, the task, the space and the strategy.

Example:
    >>> from attnas.build import build_space, build_task, pick_device   # doctest: +SKIP
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

from attnas import _registry
from attnas.config import RunConfig
from attnas.errors import ConfigError
from attnas.runs import RunDir


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
