"""The discrete HOGA cell as one autograd operation against its module-by-module path.

Times forward + backward of the Figure-3 cell at the three ResNet-20 stages (16 channels at
32 x 32, 32 at 16 x 16, 64 at 8 x 8; channels-last input, batch 64 by default) three ways,
interleaved in one process (shuffled order each round, so that load hits all alike):

* ``block``   -- one residual block of the stage (the unit the cell's cost is compared with);
* ``fused``   -- the cell as it trains by default: kernel ``hoga_cell`` of :mod:`attnas.kernels`;
* ``modules`` -- the same cell, module by module (each edge, each sum, phi: their own autograd
  operations): kernel ``hoga_cell`` off, the other kernels on.

Prints the medians, each cell as a multiple of the block and the fused / module-by-module
ratio, with the load average. Gradients are computed for the input and every parameter.

    PYTHONPATH=. python benchmarks/bench_hoga_fused_cell.py --threads 2 --repeats 21
"""

from __future__ import annotations

import os
import statistics

from attnas.cpu_busy import choose_omp_wait_policy  # noqa: E402  (before torch: PASSIVE only on a busy machine)

choose_omp_wait_policy()

import torch  # noqa: E402
from autola_steps import kernel_bench_args, kernels_off, medians, time_interleaved  # noqa: E402


def main() -> None:
    from attnas.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    args = kernel_bench_args(__doc__, repeats=21)
    torch.manual_seed(0)
    from attnas.models.resnet_cifar import BasicBlock
    from attnas.ops import hoga_cell
    from attnas.spaces.hoga import FIGURE3_EDGES

    def step(module, x, g, fused=True):
        def run():
            torch.autograd.backward(module(x), g, inputs=[x, *module.parameters()])
        return run if fused else kernels_off(run, "hoga_cell")

    parts, stages = {}, ((16, 32), (32, 16), (64, 8))
    for C, S in stages:
        x = torch.randn(args.batch, C, S, S).contiguous(memory_format=torch.channels_last).requires_grad_()
        g = torch.randn(args.batch, C, S, S).contiguous(memory_format=torch.channels_last)
        block = BasicBlock(C, C).to(memory_format=torch.channels_last)
        cell = hoga_cell.HOGA(C, FIGURE3_EDGES, 4).to(memory_format=torch.channels_last)
        parts[f"block {C}"] = step(block, x, g)
        parts[f"fused {C}"] = step(cell, x, g)
        parts[f"modules {C}"] = step(cell, x, g, fused=False)
    for f in parts.values():
        f()
        f()
    times, _, loads = time_interleaved(parts, args.repeats, shuffle=True)
    med = medians(times)
    print(f"  load avg during: {statistics.median(v for vs in loads.values() for v in vs):.2f}")
    for C, S in stages:
        b, f, m = med[f"block {C}"], med[f"fused {C}"], med[f"modules {C}"]
        print(f"  {C:2d} channels, {S:2d} x {S:2d}: block {b * 1e3:6.2f} ms   fused cell {f * 1e3:6.2f} ms "
              f"({f / b:.2f} blocks)   module by module {m * 1e3:6.2f} ms ({m / b:.2f} blocks)   "
              f"fused / modules {f / m:.3f}")
    print(f"  load average now: {os.getloadavg()}")


if __name__ == "__main__":
    main()
