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
    elsewhere (:class:`~attnas.costs.config.CostsConfig`).
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
    >>> from attnas.costs.cost_model import CostModel  # doctest: +SKIP
    >>> model = CostModel(space, task, run, CostsConfig(repeats=5), default_batch_size=128)  # doctest: +SKIP
    >>> model.costs(arch, ["params", "latency_ms"])                                           # doctest: +SKIP
    {'params': 23114, 'latency_ms': 1.87}
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import fields, is_dataclass
from typing import Any

import torch
from torch import nn

from attnas.costs.config import COSTS
from attnas.models.complexity import count_macs, count_parameters
from attnas.runs.rng import rng_state, set_rng_state


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


def median_ms(run: Callable[[], Any], warmup: int, repeats: int, device: torch.device,
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
            out["latency_ms"] = round(median_ms(forward, warmup, repeats, device, min_repeats, rtol), 4)
        if "train_step_ms" in names:
            model.train()
            out["train_step_ms"] = round(median_ms(train_step, warmup, repeats, device, min_repeats, rtol), 4)
        if "peak_memory_mb" in names:
            model.train()
            model.zero_grad(set_to_none=True)
            out["peak_memory_mb"] = round(_peak_memory_mb(model, batch, train_step), 4)
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
        set_rng_state(saved)
    return {n: out[n] for n in names}
