"""A/B of phi and the discrete HOGA cell: an older attnas tree against this one, in one process.

Times forward + backward (input and parameter gradients) of phi (from its ``K`` nodes) and
of the Figure-3 cell (channels-last input) at the three ResNet-20 stages, built from the old
and from the current code, interleaved in a shuffled order every round so that load hits
both alike. Prints the medians and new / old. The old tree is imported as the package
``attnas_old``, made exactly as ``ab_autola_step.py``'s docstring says (``/tmp/ab`` below)::

    PYTHONPATH=.:/tmp/ab:benchmarks python benchmarks/ab_hoga_modules.py --threads 2 --repeats 31
"""

from __future__ import annotations

import os

from attnas.cpu_busy import choose_omp_wait_policy  # noqa: E402  (before torch: PASSIVE only on a busy machine)

choose_omp_wait_policy()

import torch  # noqa: E402
from autola_steps import kernel_bench_args, medians, time_interleaved  # noqa: E402


def main() -> None:
    args = kernel_bench_args(__doc__, repeats=31)
    import attnas.ops.hoga_cell as new
    import attnas_old.ops.hoga_cell as old
    from attnas.spaces.hoga import FIGURE3_EDGES

    cl = torch.channels_last
    parts = {}
    for C, S in ((16, 32), (32, 16), (64, 8)):
        c = C // 4
        x = torch.randn(args.batch, C, S, S).contiguous(memory_format=cl).requires_grad_()
        g = torch.randn(args.batch, C, S, S).contiguous(memory_format=cl)
        nodes = [torch.randn(args.batch, c, S, S).requires_grad_() for _ in range(4)]
        for tag, module in (("old", old), ("new", new)):
            torch.manual_seed(0)
            phi = module.HOGAProjection(5 * c, C)
            cell = module.HOGA(C, FIGURE3_EDGES, 4).to(memory_format=cl)
            phi_inputs, cell_inputs = [*nodes, *phi.parameters()], [x, *cell.parameters()]
            parts[f"phi {C} {tag}"] = lambda phi=phi, ins=phi_inputs, nodes=nodes, g=g: torch.autograd.grad(
                phi.project(nodes, True), ins, g)
            parts[f"cell {C} {tag}"] = lambda cell=cell, ins=cell_inputs, x=x, g=g: torch.autograd.grad(
                cell(x), ins, g)
    for f in parts.values():
        f()
        f()
    med = medians(time_interleaved(parts, args.repeats, shuffle=True)[0])
    for what in ("phi", "cell"):
        for C in (16, 32, 64):
            o, n = med[f"{what} {C} old"], med[f"{what} {C} new"]
            print(f"  {what:4s} {C:2d} channels: old {o * 1e3:7.3f} ms  new {n * 1e3:7.3f} ms  new / old {n / o:.3f}")
    print(f"  load average now: {os.getloadavg()}")


if __name__ == "__main__":
    main()
