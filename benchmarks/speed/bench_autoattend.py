"""AutoAttend graph benchmarks (issue 2 speed targets).

Measures, in one run on this machine:

1. supernet training step vs the same sampled architecture built standalone (forward +
   backward + Adam step on Cora), as a ratio per architecture, median over architectures;
2. time to evaluate one candidate on Cora's validation nodes with supernet weights;
3. peak memory of the attention layer (Eq. 8, edge-wise) on random graphs of PubMed's
   size (19,717 nodes, 88,648 edges) and with 2x and 4x the edges, each in a fresh child
   process (peak resident set size above the process's baseline), with the slope of
   log(memory) against log(edges), and what a dense N x N energy would need.

Usage::

    python -m benchmarks.speed.bench_autoattend [--threads 2] [--archs 20] [--repeats 15]

The full-protocol wall time is measured by running the recipe itself::

    time attnas --threads 2 search autoattend-cora --out runs/bench-cora
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import resource
import statistics
import time


def load_avg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def time_steps(step, repeats: int) -> float:
    step()
    step()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_steps(threads: int, n_archs: int, repeats: int) -> dict:
    import torch

    from attnas.config import load_config
    from attnas.data.root import resolve_data_root
    from attnas.runs.build import build_space, build_task

    torch.set_num_threads(threads)
    cfg = load_config("autoattend-cora")
    space = build_space(cfg)
    task = build_task(cfg, resolve_data_root(), torch.device("cpu"))
    torch.manual_seed(0)
    supernet = space.supernet(task)
    opt_s = torch.optim.Adam(supernet.parameters(), lr=0.005, weight_decay=5e-4)
    batch = next(task.batches("train"))
    rng = random.Random(0)
    ratios, sup_ms, alone_ms, eval_ms = [], [], [], []
    for _ in range(n_archs):
        arch = space.sample(rng)
        model = space.build(arch, task)
        model.load_from_supernet(supernet)
        opt_m = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
        supernet.train()
        model.train()

        def sup_step():
            opt_s.zero_grad(set_to_none=True)
            task.loss(supernet(batch, arch), batch).backward()
            opt_s.step()

        def alone_step():
            opt_m.zero_grad(set_to_none=True)
            task.loss(model(batch), batch).backward()
            opt_m.step()

        # interleave to share any drift in machine load
        s1 = time_steps(sup_step, repeats // 2)
        a1 = time_steps(alone_step, repeats // 2)
        s2 = time_steps(sup_step, repeats - repeats // 2)
        a2 = time_steps(alone_step, repeats - repeats // 2)
        s, a = (s1 + s2) / 2, (a1 + a2) / 2
        ratios.append(s / a)
        sup_ms.append(s * 1e3)
        alone_ms.append(a * 1e3)
        supernet.eval()
        eval_ms.append(time_steps(lambda: task.evaluate(lambda b: supernet(b, arch), "val"), repeats) * 1e3)
    return {
        "threads": threads, "archs": n_archs, "repeats": repeats,
        "supernet_step_ms_median": statistics.median(sup_ms),
        "standalone_step_ms_median": statistics.median(alone_ms),
        "step_ratio_median": statistics.median(ratios),
        "step_ratio_max": max(ratios),
        "eval_candidate_ms_median": statistics.median(eval_ms),
        "eval_candidate_ms_max": max(eval_ms),
    }


def _attention_peak(args) -> dict:
    n, e, d, heads, threads = args
    import torch

    from attnas.ops.autoattend.graph_attention import EdgeScaledDotProductAttention
    from attnas.ops.autoattend.graph_context import GraphContext

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    ei = torch.randint(0, n, (2, e), generator=g)
    q, k, v = (torch.randn(n, d, generator=g, requires_grad=True) for _ in range(3))
    att = EdgeScaledDotProductAttention(heads=heads)
    ctx = GraphContext(ei, n)
    _ = ctx.edge_index_with_self_loops
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    out = att(q, k, v, ctx)
    out.sum().backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"nodes": n, "edges": e, "dim": d, "peak_mib": (peak - base) / 1024}


def bench_attention_memory(threads: int) -> dict:
    n, d, heads = 19_717, 256, 4
    rows = []
    ctx = mp.get_context("spawn")
    for mult in (1, 2, 4):
        e = 88_648 * mult
        with ctx.Pool(1) as pool:
            rows.append(pool.apply(_attention_peak, ((n, e, d, heads, threads),)))
    xs = [math.log(r["edges"]) for r in rows]
    ys = [math.log(max(r["peak_mib"], 1e-3)) for r in rows]
    slope = (ys[-1] - ys[0]) / (xs[-1] - xs[0])
    dense_mib = heads * n * n * 4 / 2**20
    return {"rows": rows, "slope_log_mem_vs_log_edges": slope, "dense_energy_matrix_mib": dense_mib}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--archs", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--skip-memory", action="store_true")
    args = ap.parse_args()
    out = {"load_avg_start": load_avg()}
    out["steps"] = bench_steps(args.threads, args.archs, args.repeats)
    out["load_avg_after_steps"] = load_avg()
    if not args.skip_memory:
        out["attention_memory"] = bench_attention_memory(args.threads)
    out["load_avg_end"] = load_avg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
