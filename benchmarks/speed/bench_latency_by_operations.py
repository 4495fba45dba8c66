"""How close ``costs.latency=operations`` comes to timing the whole network (issue 25).

Samples architectures of a recipe's space and measures each one's ``latency_ms`` in this
process: as the sum of its parts, each part timed once per signature
(``costs.latency=operations``, the default early-stopping protocol), and as the whole
network's forward time with a longer protocol (2 warm-up runs, 7 timed, no early stop),
in ``--passes`` passes over all the architectures (default 3; the reference is the
median of an architecture's passes). Prints the wall time each way took, the ratio
estimate / reference (median, min, max), the rank correlation of the two (Spearman) and,
as the ceiling a noisy machine allows, the rank correlation of the reference's passes
with each other (mean over pairs), with the load average. Torch threads are pinned
(``--threads``).

On a machine shared with other work one whole-network timing is noisy: on the text space
of ``autoattend-sst5-quick`` at load 2-3 on two cores, two passes of the same 40
architectures had a rank correlation of 0.62 with each other, while two estimates had
0.997; a single pass understates how well the estimate ranks.

Before anything is timed, the whole networks of the sampled architectures run untimed
for ``--warmup-seconds`` (default 5): the first seconds of work in a fresh process run
several times slower (measured on the text space: a GRU 68 ms on its first call, 19 ms
after 1.5 s), and the parts, timed first and each only once, would carry that into
every estimate (a search measures its costs after training the supernet, warm).

Usage::

    python -m benchmarks.speed.bench_latency_by_operations [--recipe autoattend-digits-quick] [--archs 60] \\
        [--passes 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import itertools
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
    ap.add_argument("--passes", type=int, default=3, help="passes of whole-network timings (the reference: their median)")
    ap.add_argument("--warmup-seconds", type=float, default=5.0,
                    help="untimed forward passes of the sampled networks before timing (0: none)")
    args = ap.parse_args()

    import torch
    from scipy.stats import spearmanr

    torch.set_num_threads(args.threads)
    from attnas.runs.build import build_space, build_task, pick_device
    from attnas.config import load_config
    from attnas.costs.config import CostsConfig
    from attnas.costs.cost_model import CostModel
    from attnas.data.root import resolve_data_root

    cfg = load_config(args.recipe)
    space = build_space(cfg)
    task = build_task(cfg, resolve_data_root(), pick_device("cpu"))
    batch_size = cfg.strategy.options.supernet.batch_size
    by_parts = CostModel(space, task, None, CostsConfig(latency="operations"), default_batch_size=batch_size)
    whole = CostsConfig(warmup=2, repeats=7, rtol=0)
    rng = random.Random(args.seed)
    archs = [space.sample(rng) for _ in range(args.archs)]
    print(f"recipe {args.recipe}, {len(archs)} architectures, torch threads {torch.get_num_threads()}, "
          f"load {load_avg()}")
    batch = by_parts.batch()
    warm_until, i = time.perf_counter() + args.warmup_seconds, 0
    with torch.no_grad():
        while time.perf_counter() < warm_until:
            space.build(archs[i % len(archs)], task).eval()(batch)
            i += 1
    print(f"warm-up: {i} untimed forward passes ({args.warmup_seconds:g} s)")
    t0 = time.perf_counter()
    est = [by_parts.costs(a, ["latency_ms"])["latency_ms"] for a in archs]
    t_parts = time.perf_counter() - t0
    t0 = time.perf_counter()
    passes = []
    for _ in range(max(1, args.passes)):  # a fresh in-memory cache per pass: every network timed again
        model = CostModel(space, task, None, whole, default_batch_size=batch_size)
        passes.append([model.costs(a, ["latency_ms"])["latency_ms"] for a in archs])
    t_whole = time.perf_counter() - t0
    ref = [statistics.median(times) for times in zip(*passes)]
    ratios = [e / r for e, r in zip(est, ref)]
    print(f"by operations: {t_parts:.2f} s ({by_parts.parts_measured} parts timed); whole network (2 + 7 runs, "
          f"{len(passes)} passes): {t_whole:.2f} s")
    print(f"estimate / reference: median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, "
          f"max {max(ratios):.3f}; within 20 %: {sum(0.8 <= x <= 1.2 for x in ratios)} of {len(ratios)}")
    single = [spearmanr(est, p).statistic for p in passes]
    print(f"Spearman rank correlation: {spearmanr(est, ref).statistic:.3f} with the reference "
          f"(with single passes: {', '.join(f'{x:.3f}' for x in single)})")
    if len(passes) > 1:
        pairs = list(itertools.combinations(passes, 2))
        ceiling = statistics.mean(spearmanr(a, b).statistic for a, b in pairs)
        print(f"reference repeatability: Spearman between passes {ceiling:.3f} (mean of {len(pairs)} pairs)")
    print(f"load {load_avg()}")

if __name__ == "__main__":
    main()
