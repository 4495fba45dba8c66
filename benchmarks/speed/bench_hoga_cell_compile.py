"""torch.compile of one stage-1 HOGA cell against eager, forward + backward.

Times, interleaved in one run (CPU time, medians): a ResNet-20 stage-1 basic block, the
relaxed HOGA cell (nine operations mixed on every edge) and the discrete Figure-3 cell, each
eager and compiled with ``torch.compile`` (inductor, default mode). The compile time of each
(the first call, forward + backward) is printed. Batch 64, 16 channels, 32 x 32, channels-last.

    PYTHONPATH=. python -m benchmarks.speed.bench_hoga_cell_compile --threads 1 --repeats 3

Measured 2026-11-21 13:05 (load 5.1, one thread): compiled was slower than eager for all
three (block 1.66x, relaxed cell 1.11x, discrete cell 1.19x the eager time); compile took
166 s wall (39 s CPU in this process, the rest in inductor's compile workers) for the relaxed
cell. See docs/results/autola.md.
"""

from __future__ import annotations

import argparse
import os

from attnas.runtime.cpu_busy import choose_omp_wait_policy  # noqa: E402  (before torch: PASSIVE only on a busy machine)

choose_omp_wait_policy()

import time  # noqa: E402

import torch  # noqa: E402
from benchmarks._common import medians, time_interleaved  # noqa: E402


def main() -> None:
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from attnas.models.resnet_cifar import BasicBlock
    from attnas.ops.autola.hoga_cell import HOGA
    from attnas.ops.autola.hoga_relaxed import RelaxedHOGA
    from attnas.spaces.hoga import FIGURE3_EDGES

    fmt = torch.channels_last
    torch.manual_seed(0)
    x = torch.randn(args.batch, 16, 32, 32).contiguous(memory_format=fmt).requires_grad_()
    g = torch.randn(args.batch, 16, 32, 32).contiguous(memory_format=fmt)
    mods = {"block": BasicBlock(16, 16), "relaxed cell": RelaxedHOGA(16, 4), "discrete cell": HOGA(16, FIGURE3_EDGES, 4)}
    fns = {}
    for name, m in mods.items():
        m.to(memory_format=fmt)
        fns[name] = lambda m=m: m(x).backward(g)
        compiled = torch.compile(m)
        t, c = time.perf_counter(), time.process_time()
        compiled(x).backward(g)
        print(f"compile {name}: {time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s CPU in this process",
              flush=True)
        fns[f"{name} (compiled)"] = lambda cm=compiled: cm(x).backward(g)
    for f in fns.values():
        f()
    med = medians(time_interleaved(fns, args.repeats)[1])  # CPU times
    print(f"batch {args.batch}, threads {torch.get_num_threads()}, CPU-time medians of {args.repeats}, "
          f"load avg {os.getloadavg()[0]:.2f}:")
    for k, v in med.items():
        print(f"  {k:26s} {v * 1e3:8.1f} ms = {v / med['block']:5.2f} x block")


if __name__ == "__main__":
    main()
