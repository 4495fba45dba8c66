"""What this machine sustains: copy bandwidth by size, and the float32 matrix-product rate.

The estimates on the AutoLA results page ("What is left") compare kernels with these
ceilings: a copy of ``n`` MiB (``2 n`` MiB moved) in and out of cache, and ``torch.matmul``
of the shapes of phi's ``1 x 1`` convolutions at the three ResNet-20 stages (``W (C, C) @
X (B, C, P)``, ``B = 64``). Medians over the repeats, threads pinned, load average printed.

    PYTHONPATH=. python benchmarks/bench_cpu_rates.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch


def median_seconds(fn, repeats: int) -> float:
    """Median wall time of ``fn()`` over ``repeats`` calls, after three warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=21)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads={args.threads} repeats={args.repeats} torch={torch.__version__} load {os.getloadavg()[0]:.2f}")
    for mib in (1, 4, 16, 64, 256):
        a = torch.randn(mib * 262144)
        b = torch.empty_like(a)
        t = median_seconds(lambda: b.copy_(a), args.repeats)
        print(f"  copy {mib:4d} MiB: {t * 1e3:8.3f} ms  {2 * mib / 1024 / t:6.1f} GB/s")
    for C, P in ((16, 1024), (32, 256), (64, 64)):
        w, x = torch.randn(C, C), torch.randn(64, C, P)
        t = median_seconds(lambda: torch.matmul(w, x), args.repeats)
        print(f"  matmul ({C} x {C}) @ (64, {C}, {P}): {t * 1e3:7.3f} ms  {2 * C * C * 64 * P / t / 1e9:6.1f} GFLOP/s")
    print(f"  load average now: {os.getloadavg()}")


if __name__ == "__main__":
    main()
