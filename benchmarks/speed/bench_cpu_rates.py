"""What this machine sustains: copy bandwidth by size, and the float32 matrix-product rate.

The estimates on the AutoLA results page ("What is left") compare kernels with these
ceilings: a copy of ``n`` MiB (``2 n`` MiB moved), and ``torch.matmul`` of the shapes of
phi's ``1 x 1`` convolutions at the three ResNet-20 stages (``W (C, C) @ X (B, C, P)``,
``B = 64``). Each is timed two ways: back to back (the same call repeated, so that data
that fit stay in cache, as between two passes of one kernel) and between the others (every
call after all the other measurements, so that its data come from memory, as a tensor saved
in the forward and read in the backward). Medians over the repeats, threads pinned, load
average printed.

    PYTHONPATH=. python -m benchmarks.speed.bench_cpu_rates --threads 2
"""

from __future__ import annotations

import argparse
import os

import torch
from benchmarks._common import medians, time_interleaved


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=21)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads={args.threads} repeats={args.repeats} torch={torch.__version__} load {os.getloadavg()[0]:.2f}")
    fns, labels = {}, {}
    for mib in (1, 4, 16, 64, 256):
        a = torch.randn(mib * 262144)
        b = torch.empty_like(a)
        fns[f"copy {mib}"] = lambda a=a, b=b: b.copy_(a)
        labels[f"copy {mib}"] = (f"copy {mib:4d} MiB", "GB/s", 2 * mib / 1024)
    for C, P in ((16, 1024), (32, 256), (64, 64)):
        w, x = torch.randn(C, C), torch.randn(64, C, P)
        fns[f"matmul {C}"] = lambda w=w, x=x: torch.matmul(w, x)
        labels[f"matmul {C}"] = (f"matmul ({C} x {C}) @ (64, {C}, {P})", "GFLOP/s", 2 * C * C * 64 * P / 1e9)
    for fn in fns.values():  # warm-up
        fn()
    cold = medians(time_interleaved(fns, args.repeats)[0])  # each call after all the others: caches cold
    for key, (label, unit, amount) in labels.items():
        hot = medians(time_interleaved({key: fns[key]}, args.repeats)[0])[key]  # back to back: caches warm
        print(f"  {label:36s} back to back {hot * 1e3:8.3f} ms {amount / hot:6.1f} {unit}   "
              f"between the others {cold[key] * 1e3:8.3f} ms {amount / cold[key]:6.1f} {unit}")
    print(f"  load average now: {os.getloadavg()}")


if __name__ == "__main__":
    main()
