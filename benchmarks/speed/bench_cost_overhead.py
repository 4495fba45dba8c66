"""What measuring costs adds to a one-shot search's wall time (issue 25: at most 10 %).

Runs the same search (same recipe, seed and candidates: measuring leaves the random
generators alone) in this process with each variant's ``--set`` overrides, round-robin
over repeats so every variant sees the same machine load, and times ``strategy.search()``
(supernet training, scoring the candidates, re-ranking; not the final training). Prints,
per variant, the median wall time over the repeats, the median ``costs_seconds`` the
search reports, and the ratio of its median to the median of the variant without costs,
with the load average before and after each run and, in brackets, how the run timed
``latency_ms`` (``costs_latency``, ``auto`` resolved). Torch threads are pinned (``--threads``).

Default variants (on top of ``--set``):

- ``none``: no objectives, no constraints (nothing measured);
- ``params``: ``objectives=[val_<metric>, params]`` (a standalone network built per candidate);
- ``latency``: ``objectives=[val_<metric>, latency_ms]`` with the defaults, what a user
  gets: ``costs.latency=auto`` (the sum of per-operation timings where the networks split
  into operations, as AutoAttend's do; the whole network elsewhere) and the default
  protocol (1 warm-up run, 2 to 5 timed, stopping once the median is stable);
- ``latency-network``: the same with ``costs.latency=network`` (every candidate's whole
  network timed: the default before ``auto``);
- ``latency-ops``: the same with ``costs.latency=operations`` (each operation shape timed
  once);
- ``latency-2+5``: ``latency-network`` with the protocol before the early stop (2
  warm-up runs, 5 timed: ``costs.warmup=2, costs.repeats=5, costs.rtol=0``).

Besides the wall time, the process CPU time of each search is reported (on a machine
shared with other jobs it varies less than the wall time; with one torch thread the two
agree on an idle machine).

Usage::

    python -m benchmarks.speed.bench_cost_overhead [--recipe autoattend-digits-quick] [--repeats 3] \\
        [--set strategy.rerank.epochs=0] [--only none,latency,latency-network,latency-ops]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def load_avg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def variants(metric: str) -> dict[str, list[str]]:
    """The variants' ``--set`` overrides."""
    lat = f"strategy.objectives=[val_{metric}, latency_ms]"
    return {
        "none": [],
        "params": [f"strategy.objectives=[val_{metric}, params]"],
        "latency": [lat],
        "latency-network": [lat, "strategy.costs.latency=network"],
        "latency-ops": [lat, "strategy.costs.latency=operations"],
        "latency-2+5": [lat, "strategy.costs={warmup: 2, repeats: 5, rtol: 0, latency: network}"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="autoattend-digits-quick")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--set", action="append", default=["strategy.rerank.epochs=0"],
                    help="overrides applied to every variant (default: strategy.rerank.epochs=0)")
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from attnas.runs.build import build_space, build_strategy, build_task, check_strategy, check_task, pick_device
    from attnas.config import load_config
    from attnas.data.root import resolve_data_root
    from attnas.runs.run_dir import RunDir

    base = load_config(args.recipe, args.set)
    dev = pick_device("cpu")
    task = build_task(base, resolve_data_root(), dev)
    todo = variants(task.metric)
    if args.only:
        todo = {k: todo[k] for k in args.only.split(",")}
    print(f"recipe {args.recipe}, --set {args.set}, torch threads {torch.get_num_threads()}, "
          f"repeats {args.repeats}, load {load_avg()}")
    wall: dict[str, list[float]] = {k: [] for k in todo}
    cpu: dict[str, list[float]] = {k: [] for k in todo}
    costs: dict[str, list[float]] = {k: [] for k in todo}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for name, sets in todo.items():
                config = load_config(args.recipe, [*args.set, *sets])
                space = build_space(config)
                check_strategy(config, space)
                check_task(config, space, task)
                run = RunDir.create(f"{tmp}/{name}-{rep}", config.to_yaml(), {})
                strategy = build_strategy(config, space, task, run)
                before = load_avg()
                t0, c0 = time.perf_counter(), time.process_time()
                result = strategy.search()
                seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
                run.close()
                wall[name].append(seconds)
                cpu[name].append(cpu_seconds)
                costs[name].append(float(result.metrics.get("costs_seconds", 0.0)))
                print(f"  repeat {rep} {name:15s} wall {seconds:7.1f} s  cpu {cpu_seconds:7.1f} s  "
                      f"costs {costs[name][-1]:6.1f} s  ({result.metrics.get('costs_latency', '-')})  "
                      f"load {before} -> {load_avg()}", flush=True)
    ref = statistics.median(wall["none"]) if "none" in wall else None
    ref_cpu = statistics.median(cpu["none"]) if "none" in cpu else None
    print(f"{'variant':15s} {'wall s':>8s} {'ratio':>6s} {'cpu s':>8s} {'ratio':>6s} {'costs s':>8s}  (medians)")
    for name in todo:
        med, med_cpu = statistics.median(wall[name]), statistics.median(cpu[name])
        ratio = f"{med / ref:6.3f}" if ref else "   n/a"
        ratio_cpu = f"{med_cpu / ref_cpu:6.3f}" if ref_cpu else "   n/a"
        print(f"{name:15s} {med:8.1f} {ratio} {med_cpu:8.1f} {ratio_cpu} {statistics.median(costs[name]):8.1f}")
    print(f"load {load_avg()}")


if __name__ == "__main__":
    main()
