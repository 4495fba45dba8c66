"""Time and peak memory of every attention mechanism against sequence length.

For each registered mechanism (plus ``softmax-materialised``, a reference that stores the
``L x L`` score matrix, because the ``softmax`` block's fused
``scaled_dot_product_attention`` kernel does not), one forward pass of a block with
``dim`` features and ``heads`` heads on a batch of ``batch`` random sequences is timed
(median of ``--repeats`` after a warm-up) at lengths 256 ... 4096, and its peak memory
is measured. The slopes of ``log(time)`` and ``log(memory)`` against ``log(L)`` are fitted
(least squares over all lengths, and over ``L >= 1024`` where constant costs matter less):
about 1 means linear growth, 2 quadratic.

Peak memory, honestly on a CPU: the process's peak resident set is reset
(``/proc/self/clear_refs``, Linux) right before the call and the increase of ``VmHWM``
over the resident set before the call is taken (median of 3). This runs in a child
process in which glibc serves every allocation of 4 KiB or more with its own ``mmap``
(``MALLOC_MMAP_THRESHOLD_=4096``), so freed memory is returned to the system at once
and reusing it cannot hide a peak; times are measured in the parent with the normal
allocator. Resolution is one 4 KiB page (values below it are fitted as one page).
Inputs and the block's parameters exist before the measurement; the output and every
intermediate count.

Timings on a shared machine are noisy: the load average is printed beside every row,
threads are pinned (``--threads``, default 1), only ratios within one run should be
compared, and besides the wall-clock time the process CPU time of each call is recorded
(``time.process_time``; with one thread it leaves out the time the process waited for a
core, so it is the steadier of the two on a busy machine).

Usage::

    PYTHONPATH=. python -m benchmarks.speed.bench_attention_mechanisms            # a few minutes
    PYTHONPATH=. python -m benchmarks.speed.bench_attention_mechanisms --lengths 256 512 --repeats 3
    PYTHONPATH=. python -m benchmarks.speed.bench_attention_mechanisms --report docs/figures/attention_scaling.csv

Writes ``docs/figures/attention_scaling.csv`` and ``docs/figures/attention_scaling.png``.
"""

from __future__ import annotations

import argparse
import csv
import gc
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

import json
import subprocess

import numpy as np
import torch

from attnas.ops.attention_mechanisms import build_mechanism, mechanism_names

# memory is measured in a child process where glibc serves every allocation of a page or
# more with its own mmap, so freed memory goes back to the system and reuse cannot hide
MMAP_ENV = {"MALLOC_MMAP_THRESHOLD_": "4096", "MALLOC_TRIM_THRESHOLD_": "0", "MALLOC_TOP_PAD_": "0"}
PAGE = 4096

REPO = Path(__file__).resolve().parents[2]
FIGURES = REPO / "docs" / "figures"
REFERENCE = "softmax-materialised"


def _status_bytes(field: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+) kB", text).group(1)) * 1024


def peak_memory(fn) -> int:
    """Bytes by which the peak resident set exceeds the resident set before ``fn()``."""
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status_bytes("VmRSS")
    fn()
    return max(0, _status_bytes("VmHWM") - before)


class MaterialisedSoftmax(torch.nn.Module):
    """softmax(Q K^T / sqrt d) V with the score matrix stored: the textbook O(L^2)-memory reference."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.block = build_mechanism("softmax", dim, heads=heads)
        self.block.attend = self.attend  # same projections, naive kernel
        self.memory_growth = "L^2"

    def attend(self, q, k, v, mask):
        scores = (q @ k.transpose(-1, -2)) * self.block.scale
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    def forward(self, x, mask):
        return self.block(x, mask)


def make_block(name: str, dim: int, heads: int, length: int) -> torch.nn.Module:
    if name == REFERENCE:
        return MaterialisedSoftmax(dim, heads)
    return build_mechanism(name, dim, heads=heads, max_len=length)


def slope(lengths: list[int], values: list[float]) -> float:
    """Least-squares slope of log(value) against log(length)."""
    pts = [(math.log(n), math.log(v)) for n, v in zip(lengths, values) if v > 0]
    if len(pts) < 2:
        return float("nan")
    x, y = zip(*pts)
    return float(np.polyfit(x, y, 1)[0])


def prepared(name: str, length: int, args):
    torch.manual_seed(0)
    block = make_block(name, args.dim, args.heads, length).eval()
    for m in block.modules():
        if hasattr(m, "freeze_random"):
            m.freeze_random()
    x = torch.randn(args.batch, length, args.dim)
    mask = torch.ones(args.batch, length, dtype=torch.bool)
    return block, x, mask


@torch.no_grad()
def measure_time(name: str, length: int, args) -> dict:
    block, x, mask = prepared(name, length, args)
    block(x, mask)  # warm-up
    times, cpu = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        block(x, mask)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"mechanism": name, "length": length, "time_ms": 1000 * statistics.median(times),
            "cpu_ms": 1000 * statistics.median(cpu), "claimed_memory": getattr(block, "memory_growth", ""),
            "load1": os.getloadavg()[0]}


@torch.no_grad()
def measure_memory(name: str, length: int, args) -> float:
    block, x, mask = prepared(name, length, args)
    block(x, mask)  # warm-up
    return statistics.median(peak_memory(lambda: block(x, mask)) for _ in range(3)) / 2**20


def memory_in_child(names: list[str], args) -> dict:
    """Run the memory measurements in a child process with the page-sized mmap threshold."""
    cmd = [sys.executable, "-m", "benchmarks.speed.bench_attention_mechanisms", "--memory-child", "--mechanisms", *names, "--lengths", *map(str, args.lengths),
           "--dim", str(args.dim), "--heads", str(args.heads), "--batch", str(args.batch),
           "--threads", str(args.threads)]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **MMAP_ENV, "PYTHONPATH": path}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    if out.returncode:
        sys.exit(f"memory measurement failed:\n{out.stderr}")
    return {tuple(k.split("|")): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def plot(rows: list[dict], path: Path, batch: int, dim: int, heads: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["mechanism"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
    markers = "os^vD<>phx*+1"
    colors = plt.cm.tab20(np.linspace(0, 1, 20))[::2].tolist() + plt.cm.tab20(np.linspace(0, 1, 20))[1::2].tolist()
    for i, name in enumerate(names):
        rs = [r for r in rows if r["mechanism"] == name]
        ls = "--" if name == REFERENCE else "-"
        for ax, key in zip(axes, ("cpu_ms", "peak_mib")):
            ax.plot([r["length"] for r in rs], [max(r[key], 1e-3) for r in rs], ls, marker=markers[i % len(markers)],
                    color=colors[i % len(colors)], label=name, linewidth=1.2, markersize=4)
    lengths = sorted({r["length"] for r in rows})
    titles = ("forward pass, process CPU time (ms, 1 thread)", "forward pass, peak extra memory (MiB)")
    for ax, key, title in zip(axes, ("cpu_ms", "peak_mib"), titles):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.set_xlabel("sequence length L")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ref = [r for r in rows if r["mechanism"] == names[0]]
        if ref:  # guide lines: slope 1 and 2 through the first mechanism's first point
            y0 = max(ref[0][key], 1e-3)
            ax.plot(lengths, [y0 * (n / lengths[0]) for n in lengths], ":", color="grey", linewidth=0.8)
            ax.plot(lengths, [y0 * (n / lengths[0]) ** 2 for n in lengths], ":", color="black", linewidth=0.8)
    axes[1].legend(fontsize=7, ncol=2, loc="upper left")
    fig.suptitle(f"Attention mechanisms, batch {batch}, dim {dim}, {heads} heads (dotted: slope 1 and 2)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def print_ratios(rows: list[dict]) -> None:
    """Each mechanism's CPU time and peak memory over softmax's, at every length (same run)."""
    by = {(r["mechanism"], int(r["length"])): r for r in rows}
    lengths = sorted({int(r["length"]) for r in rows})
    names = list(dict.fromkeys(r["mechanism"] for r in rows))
    if not any(n == "softmax" for n in names):
        return
    print("\nratio to softmax in the same run: cpu time (and peak memory) per length")
    print(f"{'mechanism':20s} " + " ".join(f"{'L=' + str(L):>15s}" for L in lengths))
    for name in names:
        cells = []
        for L in lengths:
            r, ref = by.get((name, L)), by.get(("softmax", L))
            if r is None or ref is None:
                cells.append(f"{'-':>15s}")
                continue
            cpu = float(r["cpu_ms"]) / max(float(ref["cpu_ms"]), 1e-9)
            mem = max(float(r["peak_mib"]), PAGE / 2**20) / max(float(ref["peak_mib"]), PAGE / 2**20)
            cells.append(f"{cpu:6.2f} ({mem:6.2f})")
        print(f"{name:20s} " + " ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--mechanisms", nargs="+", default=None)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=FIGURES / "attention_scaling")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report", type=Path, default=None,
                        help="print the ratio table of a finished run's CSV (no measuring)")
    args = parser.parse_args()
    if args.report:
        with open(args.report, newline="") as fh:
            print_ratios(list(csv.DictReader(fh)))
        return
    if not Path("/proc/self/clear_refs").exists():
        sys.exit("this benchmark measures memory through /proc/self/clear_refs (Linux only)")
    torch.set_num_threads(args.threads)
    names = args.mechanisms or [REFERENCE, *mechanism_names()]
    if args.memory_child:
        print(json.dumps({f"{n}|{L}": measure_memory(n, L, args) for n in names for L in args.lengths}))
        return
    print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, batch={args.batch}, dim={args.dim}, "
          f"heads={args.heads}, repeats={args.repeats}, cpus={os.cpu_count()}")
    started = time.time()
    rows = [measure_time(n, L, args) for n in names for L in args.lengths]
    memory = memory_in_child(names, args)
    print(f"{'mechanism':20s} {'L':>5s} {'time ms':>9s} {'cpu ms':>9s} {'peak MiB':>9s} {'load1':>6s}")
    for r in rows:
        r["peak_mib"] = memory[(r["mechanism"], str(r["length"]))]
        print(f"{r['mechanism']:20s} {r['length']:5d} {r['time_ms']:9.2f} {r['cpu_ms']:9.2f} {r['peak_mib']:9.3f} "
              f"{r['load1']:6.2f}")
    print(f"\nslopes of log(value) vs log(L)   [all lengths | L >= 1024]   (total {time.time() - started:.0f} s, "
          f"load average now {' '.join(f'{v:.2f}' for v in os.getloadavg())})")
    print(f"{'mechanism':20s} {'claimed mem':>11s} {'wall time':>13s} {'cpu time':>13s} {'memory':>13s}")
    summary = []
    for name in names:
        rs = [r for r in rows if r["mechanism"] == name]
        ls = [r["length"] for r in rs]
        big = [i for i, n in enumerate(ls) if n >= 1024]
        series = {"time": [r["time_ms"] for r in rs], "cpu": [r["cpu_ms"] for r in rs],
                  "memory": [max(r["peak_mib"], PAGE / 2**20) for r in rs]}
        row = {"mechanism": name, "claimed_memory": rs[0]["claimed_memory"]}
        for key, values in series.items():
            row[f"{key}_slope"] = slope(ls, values)
            row[f"{key}_slope_L>=1024"] = slope([ls[i] for i in big], [values[i] for i in big])
        summary.append(row)
        cells = " ".join(f"{row[f'{k}_slope']:6.2f} | {row[f'{k}_slope_L>=1024']:4.2f}" for k in series)
        print(f"{name:20s} {row['claimed_memory']:>11s} {cells}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out.with_suffix(".csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with open(args.out.parent / (args.out.name + "_slopes.csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(summary[0]))
        writer.writeheader()
        writer.writerows(summary)
    print_ratios(rows)
    plot(rows, args.out.with_suffix(".png"), args.batch, args.dim, args.heads)
    print(f"wrote {args.out.with_suffix('.csv')}, {args.out.name}_slopes.csv and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
