"""AutoAttend on SST-5: time of one supernet epoch and of evaluating 1,000 architectures (issue 3).

Measures, in one run on this machine, with ``torch.set_num_threads`` pinned:

1. **Supernet epoch** over the 8,544 SST-5 training sentences (24 layers, hidden 64,
   batch 128, max length 64, one architecture sampled from the prior per step, Adam):
   ``--steps`` training steps are timed (after ``--warmup`` untimed ones) and the median
   step is multiplied by the 67 steps of an epoch. Done with a plain shuffle and with
   length-bucketed batches (``task.bucket``), the two interleaved step by step so that
   both see the same machine load.
2. **Evaluating 1,000 architectures** on the 1,101 dev sentences with supernet weights
   (eval mode, batches sorted by length): ``--archs`` architectures from the prior are
   scored and the median is multiplied by 1,000 (an extrapolation from a subset). Also
   the share of that time spent in the shared stem, i.e. the most that caching the stem's
   output across candidates could save.

Every figure is given as wall-clock seconds and as the process's CPU seconds (on a
machine shared with other jobs the CPU time is the steadier number; with one thread it
is what a quiet core would take), with the load average before and after.

Usage::

    PYTHONPATH=. python benchmarks/bench_autoattend_text.py [--threads 2] [--steps 20] [--archs 20]

Issue 3 targets (two quiet CPU cores): <= 30 s per supernet epoch, <= 5 min per 1,000
evaluations.
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


def timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--steps", type=int, default=20, help="timed supernet steps per batching")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--archs", type=int, default=20, help="architectures scored on the dev set")
    ap.add_argument("--bucket", type=int, default=8, help="chunk size (in batches) of the bucketed shuffle")
    ap.add_argument("--eval-batch", type=int, default=128, help="the strategy scores with the supernet batch size")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    import torch

    from attnas.data.root import resolve_data_root
    from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
    from attnas.tasks.text_classification import TextClassificationConfig, TextClassificationTask

    torch.set_num_threads(args.threads)
    out = {"threads": args.threads, "layers": args.layers, "load_avg_start": load_avg()}
    root = resolve_data_root(args.data_dir)
    plain = TextClassificationTask(TextClassificationConfig(dataset="sst5"), root)
    bucketed = TextClassificationTask(TextClassificationConfig(dataset="sst5", bucket=args.bucket), root)
    space = AutoAttendSpace(AutoAttendConfig(layers=args.layers, hidden=64, pool="text", heads=8, context="fc",
                                             dropout=0.1, attn_dropout=0.1))
    torch.manual_seed(0)
    t0 = time.perf_counter()
    supernet = space.supernet(plain)
    out["supernet_build_s"] = round(time.perf_counter() - t0, 2)
    out["supernet_params_M"] = round(sum(p.numel() for p in supernet.parameters()) / 1e6, 1)
    params = list(supernet.parameters())
    opt = torch.optim.Adam(params, lr=0.005)
    steps_per_epoch = -(-plain.num_examples("train") // 128)
    rng = random.Random(0)

    def step(batch) -> None:
        arch = space.sample(rng)
        opt.zero_grad(set_to_none=True)
        plain.loss(supernet(batch, arch), batch).backward()
        torch.nn.utils.clip_grad_norm_(params, 5.0)
        opt.step()

    supernet.train()
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    it_plain = iter(plain.batches("train", shuffle=True, generator=g1))
    it_bucket = iter(bucketed.batches("train", shuffle=True, generator=g2))
    times = {"plain": [], "bucketed": []}
    n = args.warmup + args.steps
    for i in range(n):
        for name, it in (("plain", it_plain), ("bucketed", it_bucket)):
            w, c = timed(lambda: step(next(it)))
            if i >= args.warmup:
                times[name].append((w, c))
    out["load_avg_after_training"] = load_avg()
    for name, ts in times.items():
        w, c = statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)
        out[f"supernet_epoch_{name}"] = {"step_wall_s": round(w, 3), "step_cpu_s": round(c, 3),
                                         "epoch_wall_s_est": round(w * steps_per_epoch, 1),
                                         "epoch_cpu_s_est": round(c * steps_per_epoch, 1),
                                         "timed_steps": len(ts), "steps_per_epoch": steps_per_epoch}

    supernet.eval()
    evals = []
    for _ in range(args.archs):
        arch = space.sample(rng)
        evals.append(timed(lambda: plain.evaluate(lambda b: supernet(b, arch), "val", batch_size=args.eval_batch)))
    w, c = statistics.median(e[0] for e in evals), statistics.median(e[1] for e in evals)
    out["evaluate_1000"] = {"per_arch_wall_s": round(w, 3), "per_arch_cpu_s": round(c, 3),
                            "wall_s_est": round(1000 * w, 1), "cpu_s_est": round(1000 * c, 1),
                            "archs_timed": args.archs, "eval_batch": args.eval_batch,
                            "dev_sentences": plain.num_examples("val")}
    # what caching the stem's output across candidates could save at most: the stem alone over the dev set
    with torch.no_grad():
        stem = [timed(lambda: [supernet.stem(b) for b in plain.batches("val", batch_size=args.eval_batch,
                                                                        sort_by_length=True)])
                for _ in range(5)]
    out["evaluate_1000"]["stem_share_of_eval_cpu"] = round(statistics.median(t[1] for t in stem) / c, 4)
    out["load_avg_end"] = load_avg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
