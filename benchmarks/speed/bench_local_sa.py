"""Speed of local self-attention against a 3x3 convolution of the same width (CPU).

Forward + backward of one layer on a batch of 32 maps of 32x32 with 32 channels (the
setting of the full-attention NAS issue): the eager unfold definition (``unfold``: both kernels off),
the flat PyTorch kernel ``local_attention_flat`` (``fast``: the compiled kernel off) and the compiled CPU kernel
``local_attention`` (``fused``: both on) of :mod:`attnas.kernels` at k=3 and
k=7 (all with their q/k/v projections) and ``Conv2d(32, 32, 3)``. Variants are timed
round-robin (one call of each per round) so that they share the machine's load; medians
over rounds of the wall time and of the process CPU time are reported with the load
average seen while each was measured, and every ratio is against the convolution of the
same run. The last lines state the issue's targets (k3 within 2x, k7 within 5x of the
convolution, wall-time ratio) for the best implementation measured.

Also prints the multiply-adds per output position of each layer and the kernel build time.

Usage::

    PYTHONPATH=. python -m benchmarks.speed.bench_local_sa [--threads 2] [--rounds 7] [--impls fast,fused] [--skip-unfold]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch
from torch import nn

import attnas.kernels
from attnas.ops.fullattn.local_self_attention import LocalSelfAttention

#: implementation -> the kernels switched off to run it
KERNELS_OFF = {"unfold": ("local_attention", "local_attention_flat"), "fast": ("local_attention",), "fused": ()}


def macs_per_position(kind: str, channels: int, ks: int = 3, heads: int = 8) -> dict[str, int]:
    """Multiply-adds per output position of a layer with ``channels`` in and out."""
    C, K2 = channels, ks * ks
    if kind == "conv":
        return {"total": K2 * C * C}
    parts = {
        "q/k/v projections": 3 * C * C,
        "q.k logits": C * K2,
        "q.r relative (SASA form, C*k^2)": C * K2,
        "weights.v": C * K2,
    }
    parts["total"] = sum(parts.values())
    parts["q.r as computed here (row+column, C*2k)"] = C * 2 * ks
    return parts


def main() -> None:
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--skip-unfold", action="store_true", help="leave out the (slow) unfold reference")
    parser.add_argument("--impls", default="fast,fused", help="local SA implementations to time (fast, fused)")
    args = parser.parse_args()
    impls = [i for i in args.impls.split(",") if i]

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, C, S = args.batch, args.channels, args.size
    x = torch.randn(B, C, S, S, requires_grad=True)

    layers: dict[str, nn.Module] = {"conv3x3": nn.Conv2d(C, C, 3, padding=1, bias=False)}
    off: dict[str, tuple[str, ...]] = {"conv3x3": ()}
    if not args.skip_unfold:
        layers["unfold_k7"], off["unfold_k7"] = LocalSelfAttention(C, C, 7, args.heads), KERNELS_OFF["unfold"]
    for impl in impls:
        for ks in (3, 7):
            layers[f"{impl}_k{ks}"] = LocalSelfAttention(C, C, ks, args.heads)
            off[f"{impl}_k{ks}"] = KERNELS_OFF[impl]
    build = ""
    if "fused" in impls:
        from attnas.kernels import local_attention as _local_attention_kernel

        t0 = time.perf_counter()
        lib = _local_attention_kernel.LIBRARY.load()
        build = (f"fused kernel: {'loaded' if lib is not None else 'UNAVAILABLE: ' + str(_local_attention_kernel.LIBRARY.unavailable_reason())}"
                 f" in {time.perf_counter() - t0:.1f} s (compile {_local_attention_kernel.LIBRARY.build_seconds or 0.0:.1f} s; 0 = cached)")

    def step(name: str) -> None:
        with attnas.kernels.switched_off(*off[name]):
            layers[name](x).sum().backward()

    for name in layers:  # warm-up (allocations, caches)
        step(name)
    times: dict[str, list[float]] = {name: [] for name in layers}
    cpu: dict[str, list[float]] = {name: [] for name in layers}
    loads: dict[str, list[float]] = {name: [] for name in layers}
    for _ in range(args.rounds):
        for name in layers:
            x.grad = None
            c0, t0 = time.process_time(), time.perf_counter()
            step(name)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            loads[name].append(os.getloadavg()[0])

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}, "
          f"batch {B}, {S}x{S}, C={C}, heads={args.heads}, forward+backward, median of {args.rounds} rounds")
    if build:
        print(build)
    conv, conv_cpu = statistics.median(times["conv3x3"]), statistics.median(cpu["conv3x3"])
    print(f"{'layer':<10} {'median ms':>10} {'x conv':>8} {'CPU ms':>8} {'x conv':>8} {'load avg (1 min)':>17}")
    for name in layers:
        med, med_cpu = statistics.median(times[name]), statistics.median(cpu[name])
        print(f"{name:<10} {med * 1e3:>10.1f} {med / conv:>8.2f} {med_cpu * 1e3:>8.1f} {med_cpu / conv_cpu:>8.2f} "
              f"{statistics.median(loads[name]):>17.2f}")
    for ks, target in ((3, 2.0), (7, 5.0)):
        best = min((n for n in layers if n.endswith(f"_k{ks}") and not n.startswith("unfold")),
                   key=lambda n: statistics.median(times[n]), default=None)
        if best is not None:
            ratio = statistics.median(times[best]) / conv
            print(f"target k{ks}: {best} {ratio:.2f}x conv (wall), target <= {target:g}x: "
                  f"{'met' if ratio <= target else 'MISSED'}")
    print("multiply-adds per output position:")
    print(f"  conv3x3: {macs_per_position('conv', C)['total']}")
    for ks in (3, 7):
        parts = macs_per_position("local", C, ks, args.heads)
        detail = ", ".join(f"{k} {v}" for k, v in parts.items() if k != "total")
        print(f"  local SA k{ks}: {parts['total']} ({detail})")


if __name__ == "__main__":
    main()
