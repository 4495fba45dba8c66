"""The few-channel convolutions of AutoLA's gates: the compiled kernel against oneDNN, in one process.

Forward + backward (input and weight gradients) of each gate convolution at the search's
stage-1 size (batch 64, 32 x 32), by :func:`attnas.ops.autola.small_conv.small_conv2d` (kernel
``small_conv`` of :mod:`attnas.kernels`), by ``conv2d`` on an NCHW input and by ``conv2d`` on a channels-last input (what the
relaxed cell used before the kernel). The three are interleaved round by round; prints the
median times, the kernel's speed-up over the better oneDNN layout, and the load average.

    PYTHONPATH=. python -m benchmarks.speed.bench_small_conv --threads 2 --repeats 21
"""

from __future__ import annotations

import statistics

# (name, C_in, C_out, groups, k, dilation): the normalization attention's depth-wise filters
# (Eq. 7), the spatial attention's 2 -> 1 filter on four edges (Eq. 6), CBAM's 7 x 7 (Eq. 8).
CASES = [
    ("depth-wise 3x3, d1 (16 ch)", 16, 16, 16, 3, 1),
    ("depth-wise 3x3, d2 (16 ch)", 16, 16, 16, 3, 2),
    ("spatial 2->1 3x3 (4 edges)", 8, 4, 4, 3, 1),
    ("CBAM 2->1 7x7 (4 edges)", 8, 4, 4, 7, 1),
]


def main() -> None:
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    import torch
    import torch.nn.functional as F

    from attnas.kernels.small_conv import kernel_applies
    from attnas.ops.autola.small_conv import small_conv2d
    from benchmarks._common import kernel_bench_args, medians, time_interleaved

    args = kernel_bench_args(__doc__)
    torch.manual_seed(0)
    for name, cin, cout, groups, k, d in CASES:
        x = torch.randn(args.batch, cin, 32, 32, requires_grad=True)
        x_cl = x.detach().contiguous(memory_format=torch.channels_last).requires_grad_()
        w = torch.randn(cout, cin // groups, k, k, requires_grad=True)
        if not kernel_applies(x):
            raise SystemExit("the compiled kernel is unavailable (no compiler or ATTNAS_NO_KERNELS)")

        def step(conv, inp):
            return lambda: conv(inp).backward(torch.ones(args.batch, cout, 32, 32))

        fns = {"kernel": step(lambda t: small_conv2d(t, w, None, d, groups), x),
               "oneDNN NCHW": step(lambda t: F.conv2d(t, w, None, 1, d * (k - 1) // 2, d, groups), x),
               "oneDNN channels-last": step(lambda t: F.conv2d(t, w, None, 1, d * (k - 1) // 2, d, groups), x_cl)}
        for f in fns.values():
            f(), f()
        times, _, loads = time_interleaved(fns, args.repeats)
        med = medians(times)
        best = min(med["oneDNN NCHW"], med["oneDNN channels-last"])
        print(f"{name:28s} " + "  ".join(f"{n} {v * 1e3:6.2f} ms" for n, v in med.items())
              + f"  speed-up {best / med['kernel']:4.1f}x  load {statistics.median(loads['kernel']):.2f}")


if __name__ == "__main__":
    main()
