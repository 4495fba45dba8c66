"""Accuracy against latency of the attention mechanisms on long ListOps, and their Pareto front.

For each sequence length ``L`` (default 1,000 and 4,000 tokens) and each mechanism, the
``mechanism-listops-quick`` model (dim 32, 2 pre-LN layers, 4 heads) is trained alone
(homogeneous, from scratch, the recipe's optimiser) on ListOps of ``L/2 .. L`` tokens and
its test accuracy is read from the run. The costs of every mechanism's network are then
measured in this process, on this machine, at the run's input size (a training batch of
``--batch`` sequences of up to ``L`` tokens): forward latency and training-step latency
with :func:`attnas.costs.measure.measure` (warm-up, median), interleaved over the mechanisms
``--repeats`` times so that a change of load hits all of them alike, and parameters.

The front is :func:`attnas.costs.pareto.non_dominated` on (test accuracy, forward latency).
Printed per length: each mechanism's accuracy, latencies, speed-up over softmax, whether it
is on the front, and the fastest front member within 1 point of softmax's accuracy.

Runs and measurements are kept in ``--out`` (``runs/L<L>-<mechanism>-seed<S>``,
``rows.jsonl``); running the script again reuses finished runs (a killed one is resumed).

Usage::

    PYTHONPATH=. python -m docs.results.dartformer.listops_front --out runs/listops-front          # hours
    PYTHONPATH=. python -m docs.results.dartformer.listops_front --lengths 1000 --train-size 500 --epochs 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

RECIPE = "mechanism-listops-quick"


def train_one(out: Path, length: int, mechanism: str, seed: int, args) -> dict:
    """Train ``mechanism`` at ``length`` (or reuse the finished run); its test accuracy."""
    from attnas.pipeline import search_or_resume

    overrides = [f"task.listops.min_length={length // 2}", f"task.listops.max_length={length}",
                 f"task.listops.train_size={args.train_size}", f"task.listops.val_size={args.val_size}",
                 f"task.listops.test_size={args.test_size}", f"task.batch_size={args.batch}",
                 f"retrain.batch_size={args.batch}", f"retrain.epochs={args.epochs}", "retrain.seeds=1",
                 f"retrain.patience={args.epochs}", f"strategy.arch.mechanism={mechanism}"]
    start = time.perf_counter()
    run = search_or_resume(out / "runs" / f"L{length}-{mechanism}-seed{seed}", RECIPE, overrides, seed=seed)
    metrics = json.loads(run.file("metrics.json").read_text())
    return {"test_accuracy": metrics["test_accuracy"], "val_accuracy": metrics.get("val_accuracy"),
            "seconds": round(time.perf_counter() - start, 1), "run": str(run.path)}


def measure_costs(run_dir: str, mechanisms: list[str], repeats: int, batch_size: int) -> dict[str, dict]:
    """Forward and training-step latency (median over ``repeats`` interleaved rounds) and
    parameters of each mechanism's network, at the input size of the run ``run_dir``."""
    import torch

    from attnas.costs.measure import batch_signature, measure
    from attnas.pipeline import open_finished, run_task

    run, config, _, space = open_finished(run_dir)
    task = run_task(run, config, device="cpu")
    torch.manual_seed(0)
    batch = next(iter(task.batches("train", batch_size=batch_size)))
    models = {}
    for m in mechanisms:
        torch.manual_seed(0)
        models[m] = space.build(space.arch({"mechanism": m}), task)
    times: dict[str, dict[str, list[float]]] = {m: {"latency_ms": [], "train_step_ms": []} for m in mechanisms}
    params = {}
    for _ in range(repeats):
        for m in mechanisms:
            c = measure(models[m], task, batch, ["params", "latency_ms", "train_step_ms"], warmup=1, repeats=1)
            params[m] = c["params"]
            for k in ("latency_ms", "train_step_ms"):
                times[m][k].append(c[k])
    shape = batch_signature(batch)
    return {m: {"params": params[m], "input": shape,
                **{k: statistics.median(v) for k, v in times[m].items()}} for m in mechanisms}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("runs/listops-front"))
    p.add_argument("--lengths", type=int, nargs="+", default=[1000, 4000])
    p.add_argument("--mechanisms", nargs="+", default=None, help="default: every candidate of the space")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--train-size", type=int, default=2000)
    p.add_argument("--val-size", type=int, default=200)
    p.add_argument("--test-size", type=int, default=500)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    import numpy as np
    import torch

    from attnas.costs.pareto import non_dominated
    from attnas.spaces.attention_mechanisms import DEFAULT_CANDIDATES

    torch.set_num_threads(args.threads)
    os.environ.setdefault("ATTNAS_PROGRESS", "0")
    mechanisms = args.mechanisms or list(DEFAULT_CANDIDATES)
    args.out.mkdir(parents=True, exist_ok=True)
    rows_file = args.out / "rows.jsonl"
    for length in args.lengths:
        acc: dict[str, list[float]] = {}
        first_run = None
        for m in mechanisms:
            for seed in range(args.seeds):
                r = train_one(args.out, length, m, seed, args)
                acc.setdefault(m, []).append(r["test_accuracy"])
                first_run = first_run or r["run"]
                print(f"L={length} {m} seed {seed}: test {r['test_accuracy']:.4f} ({r['seconds']} s here)",
                      flush=True)
        costs = measure_costs(first_run, mechanisms, args.repeats, args.batch)
        load = os.getloadavg()[0]
        points = [{"mechanism": m, "length": length, "test_accuracy": statistics.mean(acc[m]),
                   "test_accuracies": acc[m], **costs[m], "load1": round(load, 2)} for m in mechanisms]
        F = np.array([[-pt["test_accuracy"], pt["latency_ms"]] for pt in points])
        front = set(non_dominated(F))
        soft = next(pt for pt in points if pt["mechanism"] == "softmax")
        with rows_file.open("a") as fh:
            for i, pt in enumerate(points):
                pt["on_front"] = i in front
                pt["speedup_vs_softmax"] = soft["latency_ms"] / pt["latency_ms"]
                pt["points_vs_softmax"] = 100 * (pt["test_accuracy"] - soft["test_accuracy"])
                fh.write(json.dumps({**pt, "threads": args.threads, "train_size": args.train_size,
                                     "epochs": args.epochs, "batch": args.batch}) + "\n")
        print(f"\nL = {length} (input {soft['input']}, {args.threads} thread(s), load {load:.2f})")
        print("| mechanism | test acc % | forward ms | train step ms | speed-up vs softmax | on front |")
        print("|---|---|---|---|---|---|")
        for pt in sorted(points, key=lambda q: q["latency_ms"]):
            print(f"| {pt['mechanism']} | {100 * pt['test_accuracy']:.1f} | {pt['latency_ms']:.1f} | "
                  f"{pt['train_step_ms']:.1f} | {pt['speedup_vs_softmax']:.2f} | {'yes' if pt['on_front'] else ''} |")
        close = [pt for pt in points if pt["on_front"] and pt["points_vs_softmax"] >= -1.0
                 and pt["mechanism"] != "softmax"]
        if close:
            best = max(close, key=lambda q: q["speedup_vs_softmax"])
            print(f"fastest front member within 1 point of softmax: {best['mechanism']} "
                  f"({best['speedup_vs_softmax']:.2f}x, {best['points_vs_softmax']:+.1f} points)")
        else:
            print("no front member other than softmax is within 1 point of softmax")


if __name__ == "__main__":
    main()
