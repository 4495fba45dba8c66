"""Where a training step of ResNet-20 + the Figure-3 HOGA cell (or plain ResNet-20) spends its time.

``torch.profiler`` over a few SGD steps (batch 64, channels-last, as ``bench_autola_step.py``
times them); prints the operations by self CPU time (divide by ``--steps`` for per-step
figures).

    PYTHONPATH=. python benchmarks/profile_autola_step.py --threads 2 --steps 5 [--plain]
"""

from __future__ import annotations

import argparse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rows", type=int, default=30)
    ap.add_argument("--plain", action="store_true", help="profile plain ResNet-20 instead")
    args = ap.parse_args()

    import torch
    from torch.profiler import profile

    from attnas.models.hoga_networks import hoga_network
    from attnas.models.resnet_cifar import cifar_resnet
    from attnas.spaces.hoga import FIGURE3_EDGES
    from autola_steps import training_step

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    fmt = torch.channels_last
    net = cifar_resnet("resnet20") if args.plain else hoga_network("resnet20", FIGURE3_EDGES, groups=4)
    net = net.to(memory_format=fmt)
    batch = (torch.randn(64, 3, 32, 32).contiguous(memory_format=fmt), torch.randint(0, 10, (64,)))
    step = training_step(net, list(net.parameters()), batch)
    for _ in range(3):
        step()
    with profile() as prof:
        for _ in range(args.steps):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
