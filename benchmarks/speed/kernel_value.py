"""What each compiled kernel is worth: the end-to-end step it serves, all kernels on against
only that kernel off.

For every kernel of :mod:`attnas.kernels` the step it serves is timed (forward, backward and
an SGD update at a small CIFAR-like size) with every kernel enabled and with only that kernel
disabled, the two interleaved (A B A B ...) on ``--threads`` torch threads; the median of
``--repeats`` timings each. Prints the load average before and after and a markdown table:
kernel, step, median time on / off, slowdown without the kernel, lines of C++ (its ``csrc``
file, not the shared headers) + Python glue. Keep a kernel where the slowdown is >= 10 % (in a step it serves).

Usage::

    PYTHONPATH=. python -m benchmarks.speed.kernel_value                 # full (quiet machine!)
    PYTHONPATH=. python -m benchmarks.speed.kernel_value --repeats 3 --warmup 1 --batch 8   # smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

import attnas.kernels as kernels
from benchmarks.checks.default_path_digests import autoattend_supernet
from attnas.models.hoga_networks import RelaxedHOGANetwork, hoga_network
from attnas.spaces.hoga import FIGURE3_EDGES

ROOT = Path(kernels.__file__).resolve().parent

#: kernel -> (its C++ source, the steps it serves)
SERVES = {
    "grouped_mixed_op": (None, ("autola_darts", "autola_darts_no_hoga_gates")),
    "small_conv": ("small_conv.cpp", ("autola_darts",)),
    "hoga_gates": ("hoga_gates.cpp", ("autola_darts",)),
    "attention_gates": ("attention_gates.cpp", ("autola_retrain",)),
    "fused_phi": ("fused_phi.cpp", ("autola_darts", "autola_retrain")),
    "local_attention_flat": (None, ("fullattn_darts_fast",)),
    "local_attention": ("local_attention.cpp", ("fullattn_darts",)),
    "dropout": ("dropout.cpp", ("dropout_mlp",)),
    "window_max": (None, ("autoattend_text_supernet",)),
    "sparse_transpose": (None, ("autoattend_graph_supernet",)),
}

#: workload -> kernels off in both arms (the flat local attention runs where the compiled one is off)
BASE_OFF = {"fullattn_darts_fast": ("local_attention",), "autola_darts_no_hoga_gates": ("hoga_gates",)}


def lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


def cost(kernel: str) -> str:
    src, _ = SERVES[kernel]
    cpp = lines(ROOT / "csrc" / src) if src else 0
    if src == "small_conv.cpp":
        cpp = lines(ROOT / "csrc" / "small_conv.h")
    return f"{cpp} + {lines(ROOT / f'{kernel}.py')}"


def autoattend_step(pool: str, batch_size: int) -> Callable[[], None]:
    """One AutoAttend supernet training step (forward, backward, Adam update) on real data
    (``pool="text"``: SST-5, 8 layers of hidden 64; ``"graph"``: the ``autoattend-cora``
    recipe's supernet on Cora). Each call takes the next of 8 architectures drawn from the
    prior, each used for two calls in a row, so the two arms of :func:`measure` run the same
    architectures."""
    import random

    space, task, supernet, data = autoattend_supernet(pool, batch_size, layers=8, hidden=64, heads=8)
    opt = torch.optim.Adam(supernet.parameters(), lr=0.005)
    rng = random.Random(0)
    archs = [space.sample(rng) for _ in range(8)]
    calls = [0]

    def step() -> None:
        arch = archs[(calls[0] // 2) % len(archs)]
        calls[0] += 1
        opt.zero_grad(set_to_none=True)
        task.loss(supernet(data, arch), data).backward()
        opt.step()

    return step


def make_step(name: str, batch: int, size: int) -> Callable[[], None]:
    """One training step (forward, backward, SGD update) of the named workload."""
    torch.manual_seed(0)
    if name.startswith("autoattend_"):
        return autoattend_step(name.split("_")[1], batch)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 10, (batch,))
    if name in ("autola_darts", "autola_darts_no_hoga_gates"):
        model = RelaxedHOGANetwork("resnet20", width=16)
    elif name == "autola_retrain":
        model = hoga_network("resnet20", FIGURE3_EDGES, width=16)
    elif name in ("fullattn_darts", "fullattn_darts_fast"):  # the relaxed full-attention NAS network
        from attnas.models.stagewise_network import RelaxedStagewiseNetwork

        model = RelaxedStagewiseNetwork(3, 10, init_channels=16, reduction=2)
    elif name == "dropout_mlp":
        from attnas.ops.shared.dropout import FastDropout

        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * size * size, 512), torch.nn.ReLU(),
                                    FastDropout(0.3), torch.nn.Linear(512, 512), torch.nn.ReLU(), FastDropout(0.3),
                                    torch.nn.Linear(512, 10))
    else:
        raise ValueError(name)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def timed(step: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def measure(kernel: str, step: Callable[[], None], repeats: int, warmup: int,
            base_off: tuple[str, ...] = ()) -> tuple[float, float]:
    """Median seconds per step with every kernel on (but ``base_off``), and with ``kernel`` off
    too, interleaved."""
    on, off = [], []
    for i in range(warmup + repeats):
        with kernels.switched_off(*base_off):
            a = timed(step)
        with kernels.switched_off(kernel, *base_off):
            b = timed(step)
        if i >= warmup:
            on.append(a)
            off.append(b)
    return statistics.median(on), statistics.median(off)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=32, help="image side (CIFAR: 32)")
    ap.add_argument("--kernels", default=",".join(SERVES), help="comma-separated subset")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"load average before: {os.getloadavg()}; threads {args.threads}, batch {args.batch}, "
          f"{args.size}x{args.size}, {args.repeats} repeats (+{args.warmup} warm-up), interleaved")
    steps: dict[str, Callable[[], None]] = {}
    rows = []
    for kernel in args.kernels.split(","):
        for workload in SERVES[kernel][1]:
            if workload not in steps:
                steps[workload] = make_step(workload, args.batch, args.size)
            t_on, t_off = measure(kernel, steps[workload], args.repeats, args.warmup, BASE_OFF.get(workload, ()))
            rows.append((kernel, workload, t_on, t_off, t_off / t_on - 1, cost(kernel)))
    print(f"load average after: {os.getloadavg()}\n")
    print("| kernel | step | all on (ms) | without it (ms) | slowdown without it | C++ + glue lines | keep (>= 10 %) |")
    print("|---|---|---|---|---|---|---|")
    for kernel, workload, t_on, t_off, slow, loc in rows:
        print(f"| {kernel} | {workload} | {1e3 * t_on:.1f} | {1e3 * t_off:.1f} | {100 * slow:+.1f} % | {loc} | "
              f"{'yes' if slow >= 0.10 else 'no'} |")


if __name__ == "__main__":
    main()
