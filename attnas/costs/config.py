"""What costs can be measured and how (``strategy.costs``): :data:`COSTS` and :class:`CostsConfig`.

The measurement protocol is described in :mod:`attnas.costs.measure`; the cache of measured
costs in a run directory is :class:`attnas.costs.cost_model.CostModel`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from attnas.config import CheckedConfig, NonNegativeFloat, NonNegativeInt, PositiveInt

#: The costs that can be measured, with what each one is (:mod:`attnas.costs.measure` says how).
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
        task: Overrides of the task's options for the example input only, e.g.
            ``{seq_len: 1024, train_size: 4}``: the costs of the same architecture on
            longer inputs than it trains on (the network is built for that task, so its
            position table and length-dependent projections have the longer length);
            empty: the run's own task.
    """

    batch_size: PositiveInt | None = None
    warmup: NonNegativeInt = 1
    repeats: PositiveInt = 5
    min_repeats: PositiveInt = 2
    rtol: NonNegativeFloat = 0.1
    latency: Literal["auto", "network", "operations"] = "auto"
    task: dict[str, Any] = field(default_factory=dict)

    field_prefix = "costs."

    def protocol(self, latency: str | None = None) -> dict:
        """The timing protocol (part of the cache key: a cost measured otherwise is not re-used).

        Args:
            latency: The method ``latency`` resolved to (``network`` or ``operations``;
                :attr:`CostModel.latency`); ``None``: :attr:`latency` as configured.
        """
        return {"warmup": self.warmup, "repeats": self.repeats, "min_repeats": self.min_repeats, "rtol": self.rtol,
                "latency": latency or self.latency}
