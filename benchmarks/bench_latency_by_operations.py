"""How close ``costs.latency=operations`` comes to timing the whole network (issue 25).

Samples architectures of a recipe's space and measures each one's ``latency_ms`` twice in
this process: as the sum of its parts, each part timed once per signature
(``costs.latency=operations``, the default early-stopping protocol), and as the whole
network's forward time with a longer protocol (2 warm-up runs, 7 timed, no early stop).
Prints the wall time each way took, the ratio estimate / measured (median, min, max) and
the rank correlation of the two (Spearman), with the load average. Torch threads are
pinned (``--threads``).

Usage::

    python benchmarks/bench_latency_by_operations.py [--recipe autoattend-digits-quick] [--archs 60]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time


def load_avg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="autoattend-digits-quick")
    ap.add_argument("--archs", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    import torch
    from scipy.stats import spearmanr

    torch.set_num_threads(args.threads)
    from attnas.build import build_space, build_task, pick_device
    from attnas.config import load_config
    from attnas.costs import CostModel, CostsConfig
    from attnas.data.root import resolve_data_root

    cfg = load_config(args.recipe)
    space = build_space(cfg)
    task = build_task(cfg, resolve_data_root(), pick_device("cpu"))
    batch_size = cfg.strategy.options.supernet.batch_size
    by_parts = CostModel(space, task, None, CostsConfig(latency="operations"), default_batch_size=batch_size)
    whole = CostModel(space, task, None, CostsConfig(warmup=2, repeats=7, rtol=0), default_batch_size=batch_size)
    rng = random.Random(args.seed)
    archs = [space.sample(rng) for _ in range(args.archs)]
    print(f"recipe {args.recipe}, {len(archs)} architectures, torch threads {torch.get_num_threads()}, "
          f"load {load_avg()}")
    t0 = time.perf_counter()
    est = [by_parts.costs(a, ["latency_ms"])["latency_ms"] for a in archs]
    t_parts = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = [whole.costs(a, ["latency_ms"])["latency_ms"] for a in archs]
    t_whole = time.perf_counter() - t0
    ratios = [e / r for e, r in zip(est, ref)]
    print(f"by operations: {t_parts:.2f} s ({by_parts.parts_measured} parts timed); whole network (2 + 7 runs): "
          f"{t_whole:.2f} s")
    print(f"estimate / measured: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, "
          f"max {max(ratios):.3f}; within 20 %: {sum(0.8 <= x <= 1.2 for x in ratios)} of {len(ratios)}")
    print(f"Spearman rank correlation: {spearmanr(est, ref).statistic:.3f}; load {load_avg()}")


if __name__ == "__main__":
    main()
