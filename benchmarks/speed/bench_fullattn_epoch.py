"""Time per training epoch of the stage-wise network: local SA k7 against a 3x3 convolution.

Two networks with the macro-architecture of Zhou et al. (2021, Table I, ``init_channels`` 16,
``reduction`` 2): every block (stem included) with ``Local SA_k7_h8`` as its attention, and
the same network with each attention replaced by a bias-free ``Conv2d(mid, mid, 3)`` of the
same width. One "epoch" is ``--steps`` SGD steps (forward, backward, update) on random
``--batch`` x 3 x ``--size`` x ``--size`` images; the two are timed round-robin (one epoch of
each per round) so they share the machine's load; the medians over rounds, their ratio and
the load average seen while each was measured are printed. The time of a full epoch of
``--images`` images is extrapolated from the per-step median.

Usage::

    PYTHONPATH=. python -m benchmarks.speed.bench_fullattn_epoch [--threads 2] [--rounds 5] [--steps 4] [--impls fast,fused]

``--impls`` picks the local attention implementations timed (one network each, run with
kernels switched off as :data:`benchmarks.speed.bench_local_sa.KERNELS_OFF` says:
``local_sa_k7`` is the flat PyTorch kernel (``fast``), ``local_sa_k7_fused`` the compiled kernel).
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
from attnas.models.stagewise_network import StagewiseNetwork
from attnas.ops.fullattn.self_attention_block import SelfAttentionBlock
from benchmarks.speed.bench_local_sa import KERNELS_OFF


def conv_twin(net: StagewiseNetwork) -> StagewiseNetwork:
    """``net`` with every block's attention replaced by a 3x3 convolution of the same width."""
    for m in net.modules():
        if isinstance(m, SelfAttentionBlock):
            mid = m.reduce.out_channels
            m.attention = nn.Conv2d(mid, mid, 3, padding=1, bias=False)
    return net


def main() -> None:
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--channels", type=int, default=16, help="init_channels")
    parser.add_argument("--images", type=int, default=25000, help="images per epoch for the extrapolation")
    parser.add_argument("--impls", default="fast", help="local attention implementations (fast, fused, unfold)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(args.batch, 3, args.size, args.size)
    y = torch.randint(0, 10, (args.batch,))
    ops = ["local_sa_k7_h8"] * 15
    impls = {("local_sa_k7" if impl == "fast" else f"local_sa_k7_{impl}"): impl for impl in args.impls.split(",") if impl}
    nets = {name: StagewiseNetwork(ops, 3, 10, args.channels) for name in impls}
    nets["conv3x3"] = conv_twin(StagewiseNetwork(ops, 3, 10, args.channels))
    off = {name: KERNELS_OFF[impl] for name, impl in impls.items()} | {"conv3x3": ()}
    opts = {k: torch.optim.SGD(n.parameters(), lr=0.01, momentum=0.9) for k, n in nets.items()}

    def epoch(name: str) -> None:
        net, opt = nets[name], opts[name]
        with attnas.kernels.switched_off(*off[name]):
            for _ in range(args.steps):
                opt.zero_grad(set_to_none=True)
                nn.functional.cross_entropy(net((x, y)), y).backward()
                opt.step()

    for name in nets:  # warm-up
        epoch(name)
    times: dict[str, list[float]] = {k: [] for k in nets}
    loads: dict[str, list[float]] = {k: [] for k in nets}
    cpu: dict[str, list[float]] = {k: [] for k in nets}
    for _ in range(args.rounds):
        for name in nets:
            c0, t0 = time.process_time(), time.perf_counter()
            epoch(name)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            loads[name].append(os.getloadavg()[0])
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, threads={args.threads}, "
          f"batch={args.batch}, {args.size}x{args.size}x3, init_channels={args.channels}, {args.steps} steps/round, "
          f"{args.rounds} rounds")
    conv, conv_cpu = statistics.median(times["conv3x3"]), statistics.median(cpu["conv3x3"])
    for name in nets:
        med, med_cpu = statistics.median(times[name]), statistics.median(cpu[name])
        per_step = med / args.steps
        full = per_step * args.images / args.batch
        print(f"{name:12s} median {med:7.3f} s / {args.steps} steps ({per_step * 1000:7.1f} ms/step, "
              f"~{full / 60:6.1f} min per {args.images}-image epoch)  ratio to conv3x3 {med / conv:5.2f}  "
              f"CPU ratio {med_cpu / conv_cpu:5.2f}  load avg {statistics.median(loads[name]):.2f}")


if __name__ == "__main__":
    main()
