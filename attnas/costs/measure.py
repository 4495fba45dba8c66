"""Costs of an architecture, measured on the run's device at the task's input size.

A cost-aware search (``strategy.constraints``, ``strategy.objectives``; see
:mod:`attnas.costs.pareto`) needs what an architecture costs, not a guess from a table. This
module builds the standalone network of an architecture (:meth:`Space.build
<attnas.spaces.base.Space.build>`, freshly initialised; the values of its weights do not
change its cost) and measures:

``params``
    Parameters of the network (shared ones counted once).
``macs``
    Multiply-accumulates of one forward pass on the example batch, in eval mode
    (:func:`attnas.models.complexity.count_macs`: PyTorch's ``FlopCounterMode`` halved;
    matrix products and convolutions only, element-wise work is not counted).
``peak_memory_mb``
    Peak tensor memory in MiB during one training step (forward, loss, backward) on the
    example batch: the parameters, buffers, the batch's tensors, activations, gradients
    and temporaries alive at the same time, as PyTorch's own tracker
    (``torch.distributed._tools.mem_tracker.MemTracker``) sees them: every tensor an
    operation returns, until it is freed. Scratch memory an operation's kernel allocates
    and frees inside itself is not seen, nor the allocator's caching or fragmentation, on
    the CPU and on a GPU alike (so the figure is the same on both). Optimiser state is
    not included.
``latency_ms``
    Median wall time in milliseconds of one forward pass on the example batch, in eval
    mode without autograd: the whole network timed (``CostsConfig.latency: network``),
    or the sum of its parts' times, each part timed once (``operations``); ``auto``, the
    default, picks ``operations`` where the networks split into parts, ``network``
    elsewhere (:class:`CostsConfig`).
``train_step_ms``
    Median wall time in milliseconds of one training step (gradients zeroed, forward,
    the task's loss, backward; no optimiser step) in training mode.

Measurement protocol:

- The example batch is the first batch of the task's ``train`` split at
  ``CostsConfig.batch_size`` (default: the strategy's training batch size); a
  transductive graph task has one batch, the whole graph. Its tensors' shapes and dtypes
  are the *input size* recorded with every measurement.
- Latencies are measured in this process with its torch threads, one architecture at a
  time: ``warmup`` untimed runs, then at least ``min_repeats`` and at most ``repeats``
  timed runs, and the median is kept. Timing stops early once the median is stable: when
  one more run moved it by at most ``rtol`` of its value (so a steady network costs
  ``warmup + min_repeats`` runs, 1 + 2 by default, a noisy one up to ``warmup +
  repeats``). On a GPU, timing waits for the device (``torch.cuda.synchronize``). They
  depend on the machine's load; the other costs do not (they are the same on every run).
  Each run of an example batch costs about as much as scoring a candidate on the
  supernet, so timing every network whole (``latency: network``) adds a large share of
  the wall time of a search whose candidates are scored quickly; timing each operation
  once (``operations``, what ``auto`` picks for the AutoAttend spaces) adds little
  (``benchmarks/speed/bench_cost_overhead.py`` measures both).
- Measuring leaves every random generator as it was (building a network draws its
  initial weights; a training step may draw dropout masks), so a search with costs
  samples the same architectures as one without.
- Only the costs asked for are measured; ``params`` always (it is cheap).

Costs are cached per architecture in the run directory (``costs.jsonl``: one JSON line
per measurement, appended and flushed), keyed by the space's config, the input size, the
device, the torch threads, the protocol (with the latency method ``auto`` resolved to:
a latency timed one way is never re-used as the other) and the architecture's
``choices``; each row records that method too (``"latency"``). A resumed search reads
the file and re-uses every cost measured before the kill instead of measuring it again,
so it decides as the killed run would have, latency included (with ``auto``, it keeps
the method its rows record).

Example:
    >>> model = CostModel(space, task, run, CostsConfig(repeats=5), default_batch_size=128)  # doctest: +SKIP
    >>> model.costs(arch, ["params", "latency_ms"])                                           # doctest: +SKIP
    {'params': 23114, 'latency_ms': 1.87}
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from attnas.config import CheckedConfig, NonNegativeFloat, NonNegativeInt, PositiveInt, to_mapping
from attnas.core.errors import ConfigError
from attnas.models.complexity import count_macs, count_parameters
from attnas.runs.rng import rng_state, set_rng_state
from attnas.runs.run_dir import read_jsonl

#: The costs that can be measured, with what each one is (see the module docstring).
COSTS: dict[str, str] = {
    "params": "parameters of the standalone network",
    "macs": "multiply-accumulates of one forward pass on the example batch",
    "peak_memory_mb": "peak tensor memory (MiB) of one training step",
    "latency_ms": "median forward time (ms) on the example batch, eval mode",
    "train_step_ms": "median training-step time (ms): forward, loss, backward",
}

#: How ``latency_ms`` can be measured (:attr:`CostsConfig.latency` with ``auto`` resolved), in words.
LATENCY_METHODS: dict[str, str] = {
    "network": "the whole network timed",
    "operations": "the sum of its parts' timings",
}


def latency_clause(method: Any, used: bool) -> str:
    """The report's clause on how ``latency_ms`` was measured (``"; `latency_ms`: ..."``), or
    ``""`` when ``latency_ms`` is not ``used`` or ``method`` is not one of :data:`LATENCY_METHODS`."""
    if not used or method not in LATENCY_METHODS:
        return ""
    return f"; `latency_ms`: {LATENCY_METHODS[method]} (`strategy.costs.latency`: {method})"


#: The run-directory file of measured costs.
COSTS_FILE = "costs.jsonl"


@dataclass(frozen=True)
class CostsConfig(CheckedConfig):
    """How architecture costs are measured (``strategy.costs``).

    Attributes:
        batch_size: Size of the example batch (where the task batches; a transductive
            graph is one batch); ``None``: the strategy's training batch size.
        warmup: Untimed runs before the latencies are timed.
        repeats: Most timed runs; the median is kept.
        min_repeats: Fewest timed runs (``repeats`` when that is fewer).
        rtol: Timing stops once a run moved the median by at most this fraction of it
            (0: always ``repeats`` runs).
        latency: How ``latency_ms`` is measured. ``network``: the whole network's forward
            time, timed for every architecture. ``operations``: the sum of the times of
            its parts (stem, each operation, each layer's merge, head; a network's
            ``latency_parts``, so far the AutoAttend spaces'), each part timed once per
            signature (operation and input shape; ``warmup + 1`` untimed runs, all
            ``repeats`` timed) and shared by every architecture that has it: an
            estimate that costs almost nothing per new architecture once its operations
            were seen. ``auto`` (default): ``operations`` where the space's networks have
            ``latency_parts``, ``network`` elsewhere (:attr:`CostModel.latency` resolves
            it; the cache key and ``costs.jsonl`` hold the resolved method). Measured
            with ``benchmarks/speed/bench_latency_by_operations.py`` (one torch thread; the
            reference is the median of three whole-network timings), the estimate ranks
            architectures about as well as whole-network timings rank each other on
            both AutoAttend spaces: Spearman 0.90-0.98 on the text space
            (``autoattend-sst5-quick``, 40 architectures, 3 runs) and 0.89-0.92 on the
            graph space (``autoattend-digits-quick``, 60 architectures, 3 runs, where
            the timings' passes agreed with each other at 0.88-0.93; README.md has the
            table). So ``auto`` takes ``operations`` on both. Its absolute
            level is looser (median estimate / timing 0.75-1.06 across runs, each part
            being timed once, when the machine may be busier or quieter than when the
            networks run): a ``latency_ms`` constraint is an approximate limit, and a
            search that wants every network timed whole sets ``network``.
    """

    batch_size: PositiveInt | None = None
    warmup: NonNegativeInt = 1
    repeats: PositiveInt = 5
    min_repeats: PositiveInt = 2
    rtol: NonNegativeFloat = 0.1
    latency: Literal["auto", "network", "operations"] = "auto"

    field_prefix = "costs."

    def protocol(self, latency: str | None = None) -> dict:
        """The timing protocol (part of the cache key: a cost measured otherwise is not re-used).

        Args:
            latency: The method ``latency`` resolved to (``network`` or ``operations``;
                :attr:`CostModel.latency`); ``None``: :attr:`latency` as configured.
        """
        return {"warmup": self.warmup, "repeats": self.repeats, "min_repeats": self.min_repeats, "rtol": self.rtol,
                "latency": latency or self.latency}


def splits_into_parts(model: nn.Module) -> bool:
    """Whether ``model`` can be timed by its parts (``latency: operations``): it has ``latency_parts``."""
    return callable(getattr(model, "latency_parts", None))


def batch_signature(batch: Any, top: bool = True) -> Any:
    """The shapes and dtypes of the tensors in ``batch`` (its *input size*), as JSON data.

    Tensors become ``[shape..., dtype]`` lists; dataclasses, named tuples, tuples and lists
    are walked, and so is the batch itself when it is a mapping (a sequence task's
    ``{"tokens", "mask", "y"}``); mappings inside it (e.g. a graph batch's cache of derived
    structures, filled while a model runs) and other values are left out, so the
    signature of a batch does not change when a model has used it.
    """
    if top and isinstance(batch, dict):
        out = {str(k): batch_signature(v, False) for k, v in batch.items()}
        return {k: v for k, v in out.items() if v is not None}
    if isinstance(batch, torch.Tensor):
        return [*batch.shape, str(batch.dtype).removeprefix("torch.")]
    if is_dataclass(batch) and not isinstance(batch, type):
        out = {f.name: batch_signature(getattr(batch, f.name), False) for f in fields(batch)}
        return {k: v for k, v in out.items() if v is not None}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        out = {k: batch_signature(v, False) for k, v in zip(batch._fields, batch)}
        return {k: v for k, v in out.items() if v is not None}
    if isinstance(batch, (list, tuple)):
        return [batch_signature(v, False) for v in batch]
    return None


def stable_median(times: list[float], min_repeats: int, rtol: float) -> bool:
    """Whether timing may stop: ``min_repeats`` runs done (two at least, to judge) and the
    last one moved the median of ``times`` by at most ``rtol`` of it."""
    if len(times) < max(min_repeats, 2):
        return False
    now, before = statistics.median(times), statistics.median(times[:-1])
    return abs(now - before) <= rtol * now


def _median_ms(run: Callable[[], Any], warmup: int, repeats: int, device: torch.device,
               min_repeats: int | None = None, rtol: float = 0.0) -> float:
    """Median wall time of ``run()`` in milliseconds after ``warmup`` untimed runs: at most
    ``repeats`` timed runs, fewer once :func:`stable_median` says so."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    min_repeats = repeats if min_repeats is None else min(min_repeats, repeats)
    for _ in range(warmup):
        run()
    sync()
    times: list[float] = []
    while len(times) < repeats:
        t0 = time.perf_counter()
        run()
        sync()
        times.append((time.perf_counter() - t0) * 1000.0)
        if rtol > 0 and stable_median(times, min_repeats, rtol):
            break
    return statistics.median(times)


def _peak_memory_mb(model: nn.Module, batch: Any, step: Callable[[], Any]) -> float:
    """Peak tensor memory (MiB) that PyTorch's ``MemTracker`` sees during ``step()``."""
    from torch.distributed._tools.mem_tracker import MemTracker  # imported on first use: ~1 s

    tracker = MemTracker()
    tracker.track_external(model, *[t for t in _tensors(batch)])
    with tracker:
        step()
    peak = tracker.get_tracker_snapshot("peak")
    return max((snap["Total"] for snap in peak.values()), default=0) / 2**20


def _tensors(batch: Any, top: bool = True) -> Iterable[torch.Tensor]:
    """The tensors :func:`batch_signature` describes."""
    if top and isinstance(batch, dict):
        for v in batch.values():
            yield from _tensors(v, False)
    elif isinstance(batch, torch.Tensor):
        yield batch
    elif is_dataclass(batch) and not isinstance(batch, type):
        for f in fields(batch):
            yield from _tensors(getattr(batch, f.name), False)
    elif isinstance(batch, (list, tuple)):
        for v in batch:
            yield from _tensors(v, False)


def measure(model: nn.Module, task: Any, batch: Any, names: Iterable[str], warmup: int = 2,
            repeats: int = 5, min_repeats: int | None = None, rtol: float = 0.0) -> dict[str, float]:
    """Measure the costs ``names`` of ``model`` on ``batch`` (see the module docstring).

    The model's mode is restored and its gradients are cleared afterwards; the random
    generators are left as they were.

    Args:
        model: A standalone network (``model(batch)``) on the task's device.
        task: Its task (for the training loss).
        batch: The example batch.
        names: Which of :data:`COSTS` to measure.
        warmup: Untimed runs before timing.
        repeats: Most timed runs (median).
        min_repeats: Fewest timed runs (``None``: ``repeats``).
        rtol: Stop timing once a run moved the median by at most this fraction (0: never
            early).

    Returns:
        ``{name: value}`` for each of ``names``; ``params`` and ``macs`` are integers.
    """
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in COSTS]
    if unknown:
        raise ValueError(f"unknown cost {unknown[0]!r}; valid: {', '.join(COSTS)}")
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    saved = rng_state()
    was_training = model.training
    out: dict[str, float] = {}

    @torch.no_grad()
    def forward() -> Any:
        return model(batch)

    def train_step() -> None:
        model.zero_grad(set_to_none=True)
        task.loss(model(batch), batch).backward()

    try:
        if "params" in names:
            out["params"] = count_parameters(model)
        if "macs" in names:
            out["macs"] = int(count_macs(model, batch))
        if "latency_ms" in names:
            model.eval()
            out["latency_ms"] = round(_median_ms(forward, warmup, repeats, device, min_repeats, rtol), 4)
        if "train_step_ms" in names:
            model.train()
            out["train_step_ms"] = round(_median_ms(train_step, warmup, repeats, device, min_repeats, rtol), 4)
        if "peak_memory_mb" in names:
            model.train()
            model.zero_grad(set_to_none=True)
            out["peak_memory_mb"] = round(_peak_memory_mb(model, batch, train_step), 4)
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
        set_rng_state(saved)
    return {n: out[n] for n in names}


class CostModel:
    """Measured costs of a space's architectures on one task, cached in a run directory.

    Args:
        space: The space whose architectures are measured.
        task: The task (its device and its ``train`` split give the example batch).
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
        self.space, self.task, self.run = space, task, run
        self.options = options or CostsConfig()
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
            t0 = time.perf_counter()
            model = self._build(arch)
            o = self.options
            by_parts = self.latency == "operations" and "latency_ms" in missing
            rest = [n for n in missing if not (by_parts and n == "latency_ms")]
            new = measure(model, self.task, self.batch(), ["params", *rest], o.warmup, o.repeats,
                          o.min_repeats, o.rtol)
            if by_parts:
                new["latency_ms"] = self._latency_by_parts(model)
            del model
            seconds = time.perf_counter() - t0
            self.seconds += seconds
            self.measured += 1
            have = self._cache.setdefault(key, {})
            have.update(new)
            self._append({"key": key, "arch": arch.choices, "costs": new, "seconds": round(seconds, 4),
                          "device": str(self.device), "threads": torch.get_num_threads(), "input": self._signature,
                          "latency": self.latency})
        return {n: have[n] for n in names}

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
                        ms = round(_median_ms(run, o.warmup + 1, o.repeats, self.device), 4)
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
