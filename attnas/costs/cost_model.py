"""Measured costs of a space's architectures on one task, cached in the run directory
(``costs.jsonl``) so that a resumed search re-uses them (:mod:`attnas.costs.measure` has the protocol)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnas.config import to_mapping
from attnas.core.errors import ConfigError, did_you_mean
from attnas.costs.config import LATENCY_METHODS, CostsConfig
from attnas.costs.measure import batch_signature, measure, median_ms, splits_into_parts
from attnas.runs.rng import rng_state, set_rng_state
from attnas.runs.run_dir import read_jsonl

#: The run-directory file of measured costs.
COSTS_FILE = "costs.jsonl"
#: Prefix of the costs of a reference architecture measured beside a candidate (:meth:`CostModel.relative`).
REFERENCE = "reference:"


def example_task(task: Any, overrides: dict) -> Any:
    """``task``, or with ``overrides`` a task of its kind whose options are changed by them
    (on the same device; e.g. ``{seq_len: 1024}`` to measure costs on longer inputs).

    Raises:
        ConfigError: ``strategy.costs.task.<key>: ...`` for an option the task does not have
            or a value it refuses.
    """
    if not overrides:
        return task
    options = getattr(task, "options", None)
    if not dataclasses.is_dataclass(options):
        raise ConfigError(f"strategy.costs.task: task '{getattr(task, 'name', type(task).__name__)}' has no "
                          "options to override")
    known = {f.name for f in dataclasses.fields(options)}
    for key in overrides:
        if key not in known:
            raise ConfigError(f"strategy.costs.task.{key}: unknown option of task "
                              f"'{getattr(task, 'name', type(task).__name__)}'{did_you_mean(str(key), known)}")
    try:
        changed = dataclasses.replace(options, **overrides)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"strategy.costs.task: {exc}") from exc
    saved = rng_state()
    try:
        other = type(task)(changed, getattr(task, "data_root", None))
    finally:
        set_rng_state(saved)
    return other.to(torch.device(getattr(task, "device", "cpu")))


class CostModel:
    """Measured costs of a space's architectures on one task, cached in a run directory.

    Args:
        space: The space whose architectures are measured.
        task: The task (its device and its ``train`` split give the example batch; with
            ``options.task``, a task of the same kind with those options changed does,
            and the networks are built for it: :func:`example_task`).
        run: The run directory holding ``costs.jsonl`` (``None``: cache in memory only).
        options: The measurement protocol (``latency: auto`` is resolved on first use: :attr:`latency`).
        default_batch_size: The example batch's size when ``options.batch_size`` is unset.

    Attributes:
        seconds: Wall time spent measuring in this process (cache hits cost nothing).
        measured: Measurements made in this process (not read from the cache).
        parts_measured: Network parts timed in this process (``latency: operations``).
    """

    def __init__(self, space: Any, task: Any, run: Any = None, options: CostsConfig | None = None,
                 default_batch_size: int | None = None):
        self.options = options or CostsConfig()
        self.space, self.task, self.run = space, example_task(task, self.options.task), run
        self.batch_size = self.options.batch_size or default_batch_size
        self.seconds, self.measured, self.parts_measured = 0.0, 0, 0
        self._batch: Any = None
        self._signature: Any = None
        self._cache: dict[str, dict] = {}
        self._parts: dict[str, float] = {}  # part key -> latency_ms (latency: operations)
        self._fh = None
        self._cached_seconds = 0.0
        # the latency method: as configured, or what "auto" resolved to (on first use)
        self._latency: str | None = None if self.options.latency == "auto" else self.options.latency
        self._spare: tuple[str, nn.Module] | None = None  # (arch key, network) built to resolve "auto"
        if run is not None:
            for row in read_jsonl(Path(run.path) / COSTS_FILE):
                if isinstance(row, dict) and "part" in row and "key" in row and "latency_ms" in row:
                    self._parts[row["key"]] = float(row["latency_ms"])
                elif isinstance(row, dict) and isinstance(row.get("costs"), dict) and "key" in row:
                    self._cache.setdefault(row["key"], {}).update(row["costs"])
                    self._cached_seconds += float(row.get("seconds", 0.0))
                    if self._latency is None and row.get("latency") in LATENCY_METHODS:
                        self._latency = row["latency"]  # a resumed run keeps the method it measured with

    @property
    def total_seconds(self) -> float:
        """Wall time of every measurement in the cache file and in this process."""
        return self._cached_seconds + self.seconds

    @property
    def device(self) -> torch.device:
        """The device the costs are measured on (the task's)."""
        return torch.device(getattr(self.task, "device", "cpu"))

    def batch(self) -> Any:
        """The example batch (drawn once; the random generators are left as they were)."""
        if self._batch is None:
            saved = rng_state()
            try:
                self._batch = next(iter(self.task.batches("train", batch_size=self.batch_size)))
            finally:
                set_rng_state(saved)
            self._signature = batch_signature(self._batch)
        return self._batch

    @property
    def latency(self) -> str:
        """How ``latency_ms`` is measured here: ``network`` or ``operations``, with ``auto``
        resolved (see :meth:`resolve_latency`)."""
        return self.resolve_latency()

    def resolve_latency(self, arch: Any = None) -> str:
        """The latency method, ``auto`` resolved once: ``operations`` when the space's
        networks split into parts (:func:`splits_into_parts`), else ``network``.

        A run whose ``costs.jsonl`` records a method keeps it. Otherwise the network of
        ``arch`` (default: an architecture drawn with ``random.Random(0)``) is built to
        see (the random generators are left as they were); it is kept for measuring
        ``arch``, so resolving costs no extra build.

        Args:
            arch: The architecture about to be measured, if any.
        """
        if self._latency is None:
            if arch is None:
                arch = self.space.sample(random.Random(0))
            model = self._build(arch)
            self._latency = "operations" if splits_into_parts(model) else "network"
            self._spare = (arch.key(), model)
        return self._latency

    def _build(self, arch: Any) -> nn.Module:
        """The standalone network of ``arch`` on the device (the random generators left as they were)."""
        if self._spare is not None and self._spare[0] == arch.key():
            model, self._spare = self._spare[1], None
            return model
        saved = rng_state()
        try:
            return self.space.build(arch, self.task).to(self.device)
        finally:
            set_rng_state(saved)

    def context(self) -> dict:
        """What a measurement depends on besides the architecture (part of the cache key);
        its ``protocol`` holds the resolved latency method (:attr:`latency`)."""
        self.batch()
        return {"space": {"name": self.space.name, **(to_mapping(self.space.options) or {})},
                "input": self._signature, "device": str(self.device), "threads": torch.get_num_threads(),
                "protocol": self.options.protocol(self.latency)}

    def key(self, arch: Any) -> str:
        """The cache key of ``arch``: a SHA-256 of :meth:`context` and its ``choices``."""
        self.resolve_latency(arch)
        doc = json.dumps({**self.context(), "arch": arch.choices}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(doc.encode()).hexdigest()

    def costs(self, arch: Any, names: Iterable[str]) -> dict[str, float]:
        """The costs ``names`` of ``arch``: from the cache, else measured (and cached).

        Args:
            arch: An :class:`~attnas.core.arch.Arch` of the space.
            names: Which of :data:`COSTS` (``params`` is always measured with the others).

        Returns:
            ``{name: value}`` for each of ``names``.
        """
        names = list(dict.fromkeys(names))
        key = self.key(arch)
        have = self._cache.get(key, {})
        missing = [n for n in names if n not in have]
        if not missing:
            self._spare = None  # a network built to resolve "auto" that the cache made unnecessary
        else:
            new, seconds = self._measure(arch, missing)
            self.measured += 1
            have = self._cache.setdefault(key, {})
            have.update(new)
            self._record(key, arch, new, seconds)
        return {n: have[n] for n in names}

    def _measure(self, arch: Any, names: list[str]) -> tuple[dict[str, float], float]:
        """Measure the costs ``names`` (and ``params``) of ``arch`` now; returns them and the seconds it took."""
        t0 = time.perf_counter()
        model = self._build(arch)
        o = self.options
        by_parts = self.latency == "operations" and "latency_ms" in names
        rest = [n for n in names if not (by_parts and n == "latency_ms")]
        new = measure(model, self.task, self.batch(), ["params", *rest], o.warmup, o.repeats, o.min_repeats, o.rtol)
        if by_parts:
            new["latency_ms"] = self._latency_by_parts(model)
        del model
        seconds = time.perf_counter() - t0
        self.seconds += seconds
        return new, seconds

    def _record(self, key: str, arch: Any, costs: dict, seconds: float, **extra: Any) -> None:
        """Append a measurement of ``arch`` to ``costs.jsonl``."""
        self._append({"key": key, "arch": arch.choices, "costs": costs, "seconds": round(seconds, 4), **extra,
                      "device": str(self.device), "threads": torch.get_num_threads(), "input": self._signature,
                      "latency": self.latency})

    def relative(self, arch: Any, reference: Any, names: Iterable[str]) -> dict[str, float]:
        """The costs ``names`` of ``arch`` as fractions of those of ``reference``, measured beside it.

        ``arch`` is measured (:meth:`costs`, unless cached), then ``reference`` at once, under
        the same protocol; the reference's costs are cached in ``arch``'s entry (``costs.jsonl``:
        ``reference:<name>``), so the fraction of each architecture is measured once. Two
        latencies timed side by side keep their ratio when the machine's load changes during
        a search; a latency against one timing of the reference at the start would not.

        Args:
            arch: The measured architecture.
            reference: The architecture its costs are divided by.
            names: Which of :data:`COSTS`.

        Returns:
            ``{name: arch's cost / reference's cost}``.
        """
        names = list(dict.fromkeys(names))
        own = self.costs(arch, names)
        key = self.key(arch)
        have = self._cache[key]
        missing = [n for n in names if REFERENCE + n not in have]
        if missing:
            measured, seconds = self._measure(reference, missing)
            new = {REFERENCE + n: measured[n] for n in missing}
            have.update(new)
            self._record(key, arch, new, seconds, reference=reference.choices)
        return {n: own[n] / have[REFERENCE + n] for n in names}

    def _latency_by_parts(self, model: nn.Module) -> float:
        """``latency_ms`` of ``model`` as the sum of its parts' times (``latency: operations``),
        each part timed once per signature and cached (``costs.jsonl`` rows with a ``part``).

        Raises:
            ConfigError: When the space's networks do not split into parts.
        """
        parts_of = getattr(model, "latency_parts", None)
        if parts_of is None:
            raise ConfigError(f"strategy.costs.latency: 'operations' needs networks that split into operations; "
                              f"those of space '{self.space.name}' do not (use 'network')")
        o = self.options
        saved, was_training = rng_state(), model.training
        model.eval()
        total = 0.0
        try:
            with torch.no_grad():
                for signature, run in parts_of(self.batch()):
                    doc = json.dumps({**self.context(), "part": signature}, sort_keys=True, separators=(",", ":"))
                    key = hashlib.sha256(doc.encode()).hexdigest()
                    if key not in self._parts:
                        # timed once for every architecture that has it: the full protocol, no early stop
                        ms = round(median_ms(run, o.warmup + 1, o.repeats, self.device), 4)
                        self._parts[key] = ms
                        self.parts_measured += 1
                        self._append({"key": key, "part": signature, "latency_ms": ms})
                    total += self._parts[key]
        finally:
            model.train(was_training)
            set_rng_state(saved)
        return round(total, 4)

    def _append(self, row: dict) -> None:
        if self.run is None:
            return
        if self._fh is None:
            self._fh = open(Path(self.run.path) / COSTS_FILE, "a", encoding="utf-8")
        self._fh.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close the cache file."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
