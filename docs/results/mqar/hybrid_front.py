"""The accuracy-latency front of docs/results/mqar.md: per-layer hybrids against the homogeneous models.

Usage (from the repository root)::

    python -m docs.results.mqar.hybrid_front RUN [RUN ...]

Each ``RUN`` is a ``random-trained`` or ``evolution-trained`` run folder of ``hybrid-mqar-quick``
(its ``events.jsonl`` holds every trained candidate's architecture and validation accuracy). Every trained
architecture is timed again here, all in one process with one torch thread and in
interleaved rounds (``ROUNDS`` rounds, each architecture once per round, the median kept),
so that every latency is measured under the same conditions: the network of the run's
recipe built for the recipe's ``strategy.costs.task`` (1,024 tokens) and timed on one such
sequence (:func:`attnas.costs.measure.measure`). Prints Markdown: every architecture's
validation accuracy (at the trained length) and latency, the non-dominated ones marked
(higher accuracy, lower latency; :func:`attnas.costs.pareto.non_dominated`), and which
reach >= 95 % of softmax's validation accuracy at <= 50 % of its latency.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch

from attnas.config import load_config
from attnas.core.arch import Arch
from attnas.costs import pareto
from attnas.costs.cost_model import CostModel
from attnas.costs.measure import measure
from attnas.runs.build import build_space, build_task

ROUNDS = 5


#: The event phases of a trained candidate (``random-trained``, ``evolution-trained``).
TRAINED = ("random-trained", "evolution-trained")


def trained(run: Path) -> list[dict]:
    """The trained candidates' events of a run, in the order trained: ``arch`` and ``val_accuracy`` each."""
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    return [e for e in events if e.get("phase") in TRAINED]


def time_together(config, keys: list[tuple[str, ...]]) -> dict[tuple[str, ...], float]:
    """The latency [ms] of each per-layer architecture in ``keys`` on the recipe's
    ``strategy.costs`` input (1,024 tokens), all timed in one process in ``ROUNDS``
    interleaved rounds (each architecture once per round, 3 timed runs), the median kept."""
    space = build_space(config)
    task = build_task(config, Path("."), torch.device("cpu"))
    costs = CostModel(space, task, None, config.strategy.options.costs)
    batch = costs.batch()
    models = {k: space.build(Arch(space.name, {"mechanism": list(k)}), costs.task) for k in keys}
    times: dict[tuple[str, ...], list[float]] = {k: [] for k in keys}
    for _ in range(ROUNDS):
        for k, model in models.items():
            times[k].append(measure(model, costs.task, batch, ["latency_ms"], warmup=1, repeats=3)["latency_ms"])
    return {k: statistics.median(v) for k, v in times.items()}


def layers(choices: dict, depth: int) -> tuple[str, ...]:
    """The per-layer mechanisms of ``choices`` (a homogeneous model repeated ``depth`` times)."""
    spec = choices["mechanism"]
    return tuple(spec) if isinstance(spec, list) else (spec,) * depth


def main(runs: list[str]) -> None:
    torch.set_num_threads(1)
    config = load_config(str(Path(runs[0]) / "config.yaml"))
    space = build_space(config)
    depth = space.options.depth
    points: dict[tuple[str, ...], float] = {}
    for run in runs:
        for e in trained(Path(run)):
            points.setdefault(layers(e["arch"], depth), e["val_accuracy"])  # the first run's value wins
    soft = ("softmax",) * depth
    if soft not in points:
        raise SystemExit("no run trained softmax in every layer, the reference (add the homogeneous run)")
    latency = time_together(config, list(points))
    keys = sorted(points, key=lambda k: (-points[k], latency[k]))
    front = {keys[i] for i in pareto.non_dominated(pareto.objective_matrix(
        [{"val_accuracy": points[k], "latency_ms": latency[k]} for k in keys], ["val_accuracy", "latency_ms"]))}
    print(f"input: {config.strategy.options.costs.task.get('seq_len')} tokens, {ROUNDS} rounds; softmax: "
          f"{100 * points[soft]:.1f} % validation, {latency[soft]:.1f} ms\n")
    print("| layers | validation accuracy [%] | latency at L = 1,024 [ms] | latency / softmax's | "
          "front | >= 95 % acc., <= 50 % latency |\n|---|---|---|---|---|---|")
    for k in keys:
        ratio = latency[k] / latency[soft]
        meets = points[k] >= 0.95 * points[soft] and ratio <= 0.5
        print(f"| {' / '.join(f'`{m}`' for m in k)} | {100 * points[k]:.1f} | {latency[k]:.1f} | {ratio:.2f} | "
              f"{'yes' if k in front else ''} | {'yes' if meets else ''} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
