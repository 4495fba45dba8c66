"""The HOGA cell's layout conversion: the compiled transpose against PyTorch's copies, in one process.

At each ResNet-20 stage (batch 64) a channels-last block output is split into the cell's four
NCHW channel groups, and in the backward the groups' gradients go back into one channels-last
tensor. Times, interleaved round by round:

* ``kernel fwd``: :func:`attnas.ops.memory_format.split_nchw` (one compiled transpose);
* ``torch fwd``: ``torch.split(x.contiguous(), c, 1)`` (what the cell did before);
* ``kernel bwd``: the compiled merge of the four gradients into one channels-last tensor
  (the backward of the split, with autograd's own overhead);
* ``torch bwd``: ``torch.cat(grads, 1).contiguous(memory_format=torch.channels_last)``.

Prints the median times, the speed-ups and the load average.

    PYTHONPATH=. python benchmarks/bench_layout.py --threads 2 --repeats 21
"""

from __future__ import annotations

import statistics

STAGES = [(16, 32), (32, 16), (64, 8)]  # (channels, plane side) of ResNet-20's three stages
GROUPS = 4


def main() -> None:
    from attnas.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    import torch

    from attnas.kernels import layout as _layout_kernel
    from attnas.ops.memory_format import split_nchw
    from autola_steps import kernel_bench_args, medians, time_interleaved

    args = kernel_bench_args(__doc__)
    if _layout_kernel.LIBRARY.load() is None:
        raise SystemExit(f"the compiled kernel is unavailable: {_layout_kernel.LIBRARY.unavailable_reason()}")
    torch.manual_seed(0)
    for channels, side in STAGES:
        c = channels // GROUPS
        x = torch.randn(args.batch, channels, side, side).contiguous(memory_format=torch.channels_last)
        x.requires_grad_()
        grads = [torch.randn(args.batch, c, side, side) for _ in range(GROUPS)]

        groups = split_nchw(x, c)  # one graph, differentiated again each round

        fns = {
            "kernel fwd": lambda: split_nchw(x.detach(), c),
            "torch fwd": lambda: torch.split(x.detach().contiguous(), c, 1),
            "kernel bwd": lambda: torch.autograd.grad(groups, x, grads, retain_graph=True),
            "torch bwd": lambda: torch.cat(grads, 1).contiguous(memory_format=torch.channels_last),
        }
        for f in fns.values():
            f(), f()
        times, _, loads = time_interleaved(fns, args.repeats)
        med = medians(times)
        print(f"stage ({args.batch}, {channels}, {side}, {side}), load {statistics.median(loads['kernel fwd']):.2f}: "
              f"split kernel {med['kernel fwd'] * 1e3:.3f} ms, torch {med['torch fwd'] * 1e3:.3f} ms "
              f"({med['torch fwd'] / med['kernel fwd']:.1f}x); merge kernel {med['kernel bwd'] * 1e3:.3f} ms, "
              f"torch cat + copy {med['torch bwd'] * 1e3:.3f} ms ({med['torch bwd'] / med['kernel bwd']:.1f}x)")


if __name__ == "__main__":
    main()
