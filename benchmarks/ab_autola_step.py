"""A/B of the AutoLA training steps: an older attnas tree against this one, in one process.

Times, interleaved (CPU time and wall time, medians): a plain ResNet-20 SGD step, and the
first-order DARTS step and the retraining (Figure-3 cell) step built from the old and from
the current code, all at batch 64, channels-last, foreach optimisers. The old tree is
imported as the package ``attnas_old``; make it with::

    mkdir -p /tmp/ab && git archive addf883 attnas | tar -x -C /tmp/ab
    mv /tmp/ab/attnas /tmp/ab/attnas_old
    grep -rl attnas /tmp/ab/attnas_old | xargs sed -i -E \\
        's/\\battnas\\./attnas_old./g; s/from attnas import/from attnas_old import/g; s/"attnas"/"attnas_old"/g'
    PYTHONPATH=.:/tmp/ab python benchmarks/ab_autola_step.py --repeats 5 --threads 1
"""

from __future__ import annotations

import argparse
import os

from attnas.cli import choose_omp_wait_policy  # noqa: E402  (before torch: PASSIVE only on a busy machine)

choose_omp_wait_policy()

import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import attnas.models.hoga_networks as new
    import attnas_old.models.hoga_networks as old
    from attnas.models.resnet_cifar import cifar_resnet
    from attnas.spaces.hoga import FIGURE3_EDGES

    fmt = torch.channels_last
    torch.manual_seed(0)

    def batch():
        return torch.randn(args.batch, 3, 32, 32).contiguous(memory_format=fmt), torch.randint(0, 10, (args.batch,))

    ba, bb = batch(), batch()

    def sgd(params):
        return torch.optim.SGD(params, lr=0.025, momentum=0.9, weight_decay=3e-4, foreach=True)

    def training_step(model):
        opt = sgd(model.parameters())

        def step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(ba[0]), ba[1]).backward()
            opt.step()
        return step

    def darts_step(net):
        weights, alpha = net.weight_parameters(), net.arch_parameters()
        w_opt = sgd(weights)
        a_opt = torch.optim.Adam(alpha, lr=3e-4, betas=(0.5, 0.999), weight_decay=1e-3, foreach=True)

        def step():
            w_opt.zero_grad(set_to_none=True)
            F.cross_entropy(net(ba[0]), ba[1]).backward(inputs=weights)
            w_opt.step()
            a_opt.zero_grad(set_to_none=True)
            F.cross_entropy(net(bb[0]), bb[1]).backward(inputs=alpha)
            a_opt.step()
        return step

    steps = {"plain": training_step(cifar_resnet("resnet20").to(memory_format=fmt))}
    for tag, module in (("old", old), ("new", new)):
        torch.manual_seed(1)
        steps[f"darts-{tag}"] = darts_step(module.RelaxedHOGANetwork("resnet20").to(memory_format=fmt))
        torch.manual_seed(2)
        steps[f"discrete-{tag}"] = training_step(module.hoga_network("resnet20", FIGURE3_EDGES).to(memory_format=fmt))
    for f in steps.values():
        f()
    wall: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    loads = []
    for _ in range(args.repeats):
        for k, f in steps.items():
            t, c = time.perf_counter(), time.process_time()
            f()
            wall[k].append(time.perf_counter() - t)
            cpu[k].append(time.process_time() - c)
        loads.append(os.getloadavg()[0])
    mw = {k: statistics.median(v) for k, v in wall.items()}
    mc = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"threads={torch.get_num_threads()} batch={args.batch} repeats={args.repeats} "
          f"load avg during (median) {statistics.median(loads):.2f}")
    for k in steps:
        print(f"  {k:13s} wall {mw[k] * 1e3:8.1f} ms ({mw[k] / mw['plain']:5.2f}x plain)   "
              f"CPU {mc[k] * 1e3:8.1f} ms ({mc[k] / mc['plain']:5.2f}x plain)")


if __name__ == "__main__":
    main()
