"""Where the discrete HOGA cell's time goes, kernel by kernel, at the three ResNet-20 stages.

Runs forward + backward of the Figure-3 cell (channels-last input, batch 64 by default,
training mode: the fused cell of :mod:`attnas.ops.hoga_fused_cell`) and times every compiled
kernel call (phi, the gates, the layout conversions) by wrapping each kernel module's
``_call``; what is left of the cell's time is Python, autograd and PyTorch operations (the
identity edges' additions). Medians of the whole cell over the repeats, kernel times as
means per cell; threads pinned, load average printed.

    PYTHONPATH=. python benchmarks/profile_hoga_cell_kernels.py --threads 2 --repeats 15
"""

from __future__ import annotations

import collections
import os
import statistics
import time

import torch
from autola_steps import kernel_bench_args


def main() -> None:
    args = kernel_bench_args(__doc__, repeats=15)
    torch.manual_seed(0)
    from attnas.ops import attention_gates, fused_phi, memory_format
    from attnas.ops.hoga_cell import HOGA
    from attnas.spaces.hoga import FIGURE3_EDGES

    spent: dict[tuple[str, str], list[float]] = collections.defaultdict(list)

    def timed(module, tag: str) -> None:
        call = module._call

        def wrapper(name, *a):
            t0 = time.perf_counter()
            call(name, *a)
            spent[(tag, name)].append(time.perf_counter() - t0)
        module._call = wrapper

    for module, tag in ((fused_phi, "phi"), (attention_gates, "gate"), (memory_format, "layout")):
        timed(module, tag)
    for C, S in ((16, 32), (32, 16), (64, 8)):
        x = torch.randn(args.batch, C, S, S).contiguous(memory_format=torch.channels_last).requires_grad_()
        g = torch.randn(args.batch, C, S, S).contiguous(memory_format=torch.channels_last)
        cell = HOGA(C, FIGURE3_EDGES, 4).to(memory_format=torch.channels_last)
        params = [x, *cell.parameters()]
        for _ in range(3):
            torch.autograd.grad(cell(x), params, g)
        spent.clear()
        totals = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            torch.autograd.grad(cell(x), params, g)
            totals.append(time.perf_counter() - t0)
        total = statistics.median(totals)
        per_cell = {k: sum(v) / args.repeats for k, v in spent.items()}
        print(f"  {C} channels, {S} x {S}: cell forward + backward {total * 1e3:.2f} ms (median)")
        for (tag, name), t in sorted(per_cell.items(), key=lambda kv: -kv[1]):
            calls = len(spent[(tag, name)]) // args.repeats
            print(f"    {tag:6s} {name:18s} {calls} call(s) per cell  {t * 1e3:7.3f} ms")
        kernels = sum(per_cell.values())
        print(f"    kernels {kernels * 1e3:.2f} ms; the rest (Python, autograd, PyTorch operations) "
              f"{(total - kernels) * 1e3:.2f} ms")
    print(f"  load average now: {os.getloadavg()}")


if __name__ == "__main__":
    main()
