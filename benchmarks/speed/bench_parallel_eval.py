"""Candidate-evaluation throughput: in-process vs 1 and 2 Ray workers (issue 8).

Scores the same candidates with supernet weights, exactly as the one-shot strategies do
(:func:`attnas.strategies.supernet_scoring.score_candidates` on contiguous chunks, weights in the
object store once), three ways, round-robin over repeats so every way sees the same load:

- ``in-process``: the sequential loop of a run without ``--workers``;
- ``ray x1``: all candidates as one Ray task (one worker process);
- ``ray x2``: the candidates in ``2 x 2`` chunks on a Ray with 2 CPUs (two worker processes).

Worker start-up (process launch, imports, loading the data, building the supernet) is
timed apart, once; throughput is candidates per second, median over repeats, with the
load average printed beside each figure. Ratios are from this one run.

Usage::

    python -m benchmarks.speed.bench_parallel_eval [--recipe autoattend-cora-quick] [--candidates 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import uuid


def load_avg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="autoattend-cora-quick")
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads, here and in each worker")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from attnas.scale import parallel
    from attnas.runs.build import build_space, build_task
    from attnas.core.arch import Arch
    from attnas.config import load_config
    from attnas.data.root import resolve_data_root
    from attnas.runs.rng import seed_everything
    from attnas.strategies.supernet_scoring import score_candidates, supernet_score

    cfg = load_config(args.recipe)
    space = build_space(cfg)
    root = resolve_data_root()
    task = build_task(cfg, root, torch.device("cpu"))
    seed_everything(0)
    supernet = space.supernet(task)
    rng = random.Random(0)
    cands = [space.sample(rng).choices for _ in range(args.candidates)]
    bs = cfg.strategy.options.supernet.batch_size
    spec = parallel.RunSpec(cfg.to_dict(), str(root), "cpu")

    ex = parallel.RayExecutor(workers=2, threads=args.threads)
    try:
        state = {k: v.detach().cpu() for k, v in supernet.state_dict().items()}
        ref, token = ex.put(state), uuid.uuid4().hex
        t = time.perf_counter()
        # warm both workers up: each builds the task and the supernet once
        ex.map(score_candidates, [cands[:1], cands[1:2]], spec, ref, token, bs)
        startup = time.perf_counter() - t
        print(f"worker start-up (2 workers in parallel, incl. data + supernet build): {startup:.1f} s "
              f"(load {load_avg()})", flush=True)

        def in_process():
            return [supernet_score(supernet, task, Arch(space.name, c), bs) for c in cands]

        def ray(chunks: int):
            parts = parallel.chunks(cands, chunks)
            return [s for part in ex.imap(score_candidates, parts, spec, ref, token, bs) for s in part]

        ways = {"in-process": in_process, "ray x1": lambda: ray(1), "ray x2": lambda: ray(4)}
        reference = in_process()
        times: dict[str, list[float]] = {w: [] for w in ways}
        for rep in range(args.repeats):
            for name, fn in ways.items():
                t = time.perf_counter()
                scores = fn()
                dt = time.perf_counter() - t
                assert scores == reference, f"{name}: scores differ from the in-process ones"
                times[name].append(dt)
                print(f"repeat {rep + 1} {name:10s} {args.candidates / dt:7.1f} candidates/s  (load {load_avg()})",
                      flush=True)
        med = {w: statistics.median(ts) for w, ts in times.items()}
        print(f"\n{args.recipe}, {args.candidates} candidates, {args.threads} torch thread(s) per process, "
              f"median of {args.repeats} (load {load_avg()}):")
        for w, m in med.items():
            print(f"  {w:10s} {args.candidates / m:7.1f} candidates/s  ({1000 * m / args.candidates:.1f} ms each)")
        print(f"  ratio ray x2 / ray x1 throughput: {med['ray x1'] / med['ray x2']:.2f}")
        print(f"  ratio ray x2 / in-process throughput: {med['in-process'] / med['ray x2']:.2f}")
        print(f"  ratio ray x1 / in-process throughput: {med['in-process'] / med['ray x1']:.2f}")
        print("  scores identical to the in-process ones in every repeat")
    finally:
        ex.close()


if __name__ == "__main__":
    main()
