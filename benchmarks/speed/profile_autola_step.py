"""Where a training step of ResNet-20 + the Figure-3 HOGA cell (or plain ResNet-20, or a DARTS step) spends its time.

``torch.profiler`` over a few steps (batch 64, channels-last, as ``bench_autola_step.py``
times them): SGD steps of the retrained network, of plain ResNet-20 (``--plain``), or
first-order DARTS steps of the ResNet-20 + HOGA supernet (``--darts``); prints the operations
by self CPU time (divide by ``--steps`` for per-step figures).

    PYTHONPATH=. python -m benchmarks.speed.profile_autola_step --threads 2 --steps 5 [--plain | --darts]
"""

from __future__ import annotations

import argparse


def main() -> None:
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rows", type=int, default=30)
    kind = ap.add_mutually_exclusive_group()
    kind.add_argument("--plain", action="store_true", help="profile plain ResNet-20 instead")
    kind.add_argument("--darts", action="store_true", help="profile first-order DARTS steps of the supernet instead")
    args = ap.parse_args()

    import torch
    from torch.profiler import profile

    from attnas.models.hoga_networks import RelaxedHOGANetwork, hoga_network
    from attnas.models.resnet_cifar import cifar_resnet
    from attnas.spaces.hoga import FIGURE3_EDGES
    from benchmarks._common import darts_step, training_step

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    fmt = torch.channels_last
    def batch():
        return torch.randn(64, 3, 32, 32).contiguous(memory_format=fmt), torch.randint(0, 10, (64,))

    if args.darts:
        net = RelaxedHOGANetwork("resnet20", groups=4).to(memory_format=fmt)
        step = darts_step(net, net.weight_parameters(), net.arch_parameters(), batch(), batch())
    else:
        net = cifar_resnet("resnet20") if args.plain else hoga_network("resnet20", FIGURE3_EDGES, groups=4)
        net = net.to(memory_format=fmt)
        step = training_step(net, list(net.parameters()), batch())
    for _ in range(3):
        step()
    with profile() as prof:
        for _ in range(args.steps):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
