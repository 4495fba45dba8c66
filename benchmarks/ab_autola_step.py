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

from attnas.cpu_busy import choose_omp_wait_policy  # noqa: E402  (before torch: PASSIVE only on a busy machine)

choose_omp_wait_policy()

import statistics  # noqa: E402

import torch  # noqa: E402
from autola_steps import darts_step, medians, time_interleaved, training_step  # noqa: E402


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

    def plain_step(model):
        return training_step(model, list(model.parameters()), ba)

    def search_step(net):
        return darts_step(net, net.weight_parameters(), net.arch_parameters(), ba, bb)

    steps = {"plain": plain_step(cifar_resnet("resnet20").to(memory_format=fmt))}
    for tag, module in (("old", old), ("new", new)):
        torch.manual_seed(1)
        steps[f"darts-{tag}"] = search_step(module.RelaxedHOGANetwork("resnet20").to(memory_format=fmt))
        torch.manual_seed(2)
        steps[f"discrete-{tag}"] = plain_step(module.hoga_network("resnet20", FIGURE3_EDGES).to(memory_format=fmt))
    for f in steps.values():
        f()
    wall, cpu, loads = time_interleaved(steps, args.repeats)
    mw, mc = medians(wall), medians(cpu)
    print(f"threads={torch.get_num_threads()} batch={args.batch} repeats={args.repeats} "
          f"load avg during (median) {statistics.median(sum(loads.values(), [])):.2f}")
    for k in steps:
        print(f"  {k:13s} wall {mw[k] * 1e3:8.1f} ms ({mw[k] / mw['plain']:5.2f}x plain)   "
              f"CPU {mc[k] * 1e3:8.1f} ms ({mc[k] / mc['plain']:5.2f}x plain)")


if __name__ == "__main__":
    main()
