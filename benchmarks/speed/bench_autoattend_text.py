"""AutoAttend on SST-5: time of one supernet epoch and of evaluating 1,000 architectures (issue 3).

Issue 3 targets (two quiet CPU cores): one supernet epoch over the 8,544 SST-5 training
sentences (24 layers, hidden 64, batch 128, max length 64) in <= 30 s, and evaluating
1,000 architectures on the 1,101 dev sentences with supernet weights in <= 300 s.

Measures, in one run, with ``torch.set_num_threads`` pinned, and prints the two target
figures directly (the ``TARGET`` lines), each with the load average around it:

1. **Supernet epoch** (``attnas.training.train.train_epoch``, what ``one-shot-evolution`` runs per
   epoch: length-bucketed batches as in the recipes, one architecture sampled from the
   prior per step, Adam lr 0.005, gradient clipping 5): ``--epochs`` full epochs of 67
   steps are timed
   (the target figure: a whole epoch, not an extrapolation). Before that, ``--steps``
   steps alternate between the training step of ``train_epoch`` and the reference one of
   round 3 (every parameter zeroed, clipped and stepped), on the same batches and architectures, for their
   ratio (medians; both see the same machine load).
2. **Evaluating 1,000 architectures** on the 1,101 dev sentences with supernet weights
   (as ``supernet_score``: eval mode, batches sorted by length, batch ``--eval-batch``):
   ``--archs`` architectures from the prior are scored and their *mean* time is
   multiplied by 1,000 (an extrapolation from a measured subset). As the strategy does
   (``score_threads``, default: the torch threads), ``--score-threads`` architectures are
   scored side by side, each in a thread with one torch thread
   (``attnas.scale.parallel.map_in_threads``); then the mean is the whole set's wall time over
   its size (``--score-threads 1``: one at a time with all the torch threads, each timed).
   Evaluation runs the
   GRU on packed sequences, so there is no reference ratio here; instead the matrix-product FLOPs of each scored architecture
   are counted (``torch.utils.flop_counter``) and turned into the time 1,000 of them
   would need at ``--peak-gflops`` per thread (a lower bound).

Every figure is given in wall-clock seconds and in the process's CPU seconds (on a
shared machine the CPU time is the steadier number; with one thread it is what one
quiet core would take).

Usage (the lead's quiet re-measurement, two threads)::

    PYTHONPATH=. python -m benchmarks.speed.bench_autoattend_text --threads 2

Faster smoke run: ``--epochs 0 --steps 4 --archs 4``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time


def load_avg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def timed(fn) -> tuple[float, float, object]:
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def supernet_step(task, supernet, params: list, opt, grad_clip: float, batch, arch) -> None:
    """One step of ``attnas.training.train.train_epoch``: clip, step and clear only the parameters with a gradient."""
    import torch

    from attnas.training.train import step_with_gradients

    task.loss(supernet(batch, arch), batch).backward()
    active = [p for p in params if p.grad is not None]
    torch.nn.utils.clip_grad_norm_(active, grad_clip)
    step_with_gradients(opt, active)
    for p in active:
        p.grad = None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--epochs", type=int, default=1, help="full supernet epochs timed (the target figure)")
    ap.add_argument("--steps", type=int, default=10, help="steps per implementation for the current/reference ratio")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--archs", type=int, default=20, help="architectures scored on the dev set")
    ap.add_argument("--bucket", type=int, default=8, help="chunk size (in batches) of the bucketed shuffle")
    ap.add_argument("--eval-batch", type=int, default=128, help="the strategy scores with the supernet batch size")
    ap.add_argument("--score-threads", type=int, default=None,
                    help="architectures scored side by side, one torch thread each (default: --threads, as the "
                         "strategy; 1: one at a time)")
    ap.add_argument("--no-reference", action="store_true", help="skip the round-3 reference steps")
    ap.add_argument("--flops", type=int, default=1, help="count the FLOPs of the scored architectures (0: no)")
    ap.add_argument("--peak-gflops", type=float, default=78.0,
                    help="fp32 matrix-product GFLOP/s of one thread (78: measured on this Zen4 CPU)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    import torch

    from attnas.data.root import resolve_data_root
    from attnas.strategies.one_shot_config import SupernetConfig
    from attnas.training.train import make_optimizer, train_epoch
    from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
    from attnas.tasks.text_classification import TextClassificationConfig, TextClassificationTask

    torch.set_num_threads(args.threads)
    out = {"threads": args.threads, "layers": args.layers, "load_avg_start": load_avg()}
    root = resolve_data_root(args.data_dir)
    task = TextClassificationTask(TextClassificationConfig(dataset="sst5", bucket=args.bucket), root)
    space = AutoAttendSpace(AutoAttendConfig(layers=args.layers, hidden=64, pool="text", heads=8, context="fc",
                                             dropout=0.1, attn_dropout=0.1))
    torch.manual_seed(0)
    t0 = time.perf_counter()
    supernet = space.supernet(task)
    out["supernet_build_s"] = round(time.perf_counter() - t0, 2)
    out["supernet_params_M"] = round(sum(p.numel() for p in supernet.parameters()) / 1e6, 1)
    params = list(supernet.parameters())
    rng = random.Random(0)

    cfg = SupernetConfig(epochs=1, lr=0.005, weight_decay=0.0, grad_clip=5.0, batch_size=128)  # the recipes'
    opt = make_optimizer(params, cfg)

    def step(batch, arch) -> None:  # one step of train_epoch
        supernet_step(task, supernet, params, opt, cfg.grad_clip, batch, arch)

    def reference_step(batch, arch) -> None:  # round 3: every parameter zeroed, clipped, stepped
        opt.zero_grad(set_to_none=True)
        task.loss(supernet(batch, arch), batch).backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()

    supernet.train()
    gen = torch.Generator().manual_seed(1)
    # 1a. current vs reference operations, alternating on the same batches and architectures
    if args.steps > 0 and not args.no_reference:
        batches = list(task.batches("train", shuffle=True, generator=gen))
        times = {"current": [], "reference": []}
        for i in range(args.warmup + args.steps):
            batch, arch = batches[i % len(batches)], space.sample(rng)
            for name, fn in (("current", step), ("reference", reference_step)):
                w, c, _ = timed(lambda: fn(batch, arch))
                if i >= args.warmup:
                    times[name].append((w, c))
        med = {k: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)) for k, v in times.items()}
        out["supernet_step_ratio"] = {
            "current_step_cpu_s": round(med["current"][1], 3), "reference_step_cpu_s": round(med["reference"][1], 3),
            "current_over_reference_cpu": round(med["current"][1] / med["reference"][1], 3),
            "current_over_reference_wall": round(med["current"][0] / med["reference"][0], 3),
            "steps": args.steps, "load_avg_after": load_avg()}
    # 1b. whole epochs (the target figure)
    epochs = []
    for _ in range(args.epochs):
        la = load_avg()

        n = -(-task.num_examples("train") // cfg.batch_size)
        w, c, _ = timed(lambda: train_epoch(lambda b: supernet(b, space.sample(rng)), task, opt, params, cfg, gen))
        epochs.append({"wall_s": round(w, 1), "cpu_s": round(c, 1), "steps": n, "load_avg_before": la,
                       "load_avg_after": load_avg()})
    out["supernet_epochs"] = epochs

    # 2. evaluation of architectures with supernet weights
    supernet.eval()
    archs = [space.sample(rng) for _ in range(args.archs)]

    def score(arch) -> float:
        return task.evaluate(lambda b: supernet(b, arch), "val", batch_size=args.eval_batch)

    score_threads = args.threads if args.score_threads is None else args.score_threads
    la = load_avg()
    if archs:
        score(archs[0])  # warm-up
    if score_threads > 1 and len(archs) > 1:  # side by side: the mean is the set's time over its size
        from attnas.scale.parallel import map_in_threads

        w, c, _ = timed(lambda: list(map_in_threads(score, archs, score_threads)))
        evals = [(w / len(archs), c / len(archs))] * len(archs)
    else:
        evals = [timed(lambda: score(a)) for a in archs]
    ev = {"archs_timed": len(archs), "eval_batch": args.eval_batch, "dev_sentences": task.num_examples("val"),
          "score_threads": score_threads, "load_avg_before": la, "load_avg_after": load_avg()}
    if evals:
        ev.update(per_arch_wall_s_mean=round(statistics.mean(e[0] for e in evals), 3),
                  per_arch_cpu_s_mean=round(statistics.mean(e[1] for e in evals), 3),
                  per_arch_wall_s_median=round(statistics.median(e[0] for e in evals), 3),
                  wall_s_1000_est=round(1000 * statistics.mean(e[0] for e in evals), 1),
                  cpu_s_1000_est=round(1000 * statistics.mean(e[1] for e in evals), 1))
    if evals and args.flops:
        from torch.utils.flop_counter import FlopCounterMode

        flops = []
        for a in archs:
            with FlopCounterMode(display=False) as fc:
                score(a)
            flops.append(fc.get_total_flops())
        gflop = statistics.mean(flops) / 1e9
        ev.update(gflop_per_arch_mean=round(gflop, 1),
                  effective_gflops_per_cpu_s=round(gflop / ev["per_arch_cpu_s_mean"], 1),
                  lower_bound_s_1000_at_peak=round(1000 * gflop / (args.peak_gflops * args.threads), 1),
                  peak_gflops_per_thread=args.peak_gflops)
    out["evaluate"] = ev
    out["load_avg_end"] = load_avg()
    print(json.dumps(out, indent=1))
    for e in epochs:
        print(f"TARGET supernet epoch (8,544 sentences, {e['steps']} steps, {args.layers} layers, "
              f"{args.threads} threads): {e['wall_s']} s wall ({e['cpu_s']} CPU-s), target <= 30 s; "
              f"load average {e['load_avg_before']} -> {e['load_avg_after']}")
    if evals:
        print(f"TARGET 1,000 architectures on the 1,101 dev sentences ({args.threads} threads, {score_threads} "
              f"scored side by side, extrapolated from {len(archs)} measured, batch {args.eval_batch}): "
              f"{ev['wall_s_1000_est']} s wall "
              f"({ev['cpu_s_1000_est']} CPU-s), target <= 300 s; load average {ev['load_avg_before']} -> "
              f"{ev['load_avg_after']}")
        if "gflop_per_arch_mean" in ev:
            print(f"  {ev['gflop_per_arch_mean']} GFLOP per architecture (matrix products): 1,000 need at least "
                  f"{ev['lower_bound_s_1000_at_peak']} s at {args.peak_gflops:g} GFLOP/s per thread x "
                  f"{args.threads}; measured {ev['effective_gflops_per_cpu_s']} GFLOP per CPU-s")


if __name__ == "__main__":
    main()
