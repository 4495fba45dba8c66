"""The discrete HOGA cell's pieces: each compiled module against its PyTorch expression, in one process.

Forward + backward (the gradients of the input and of every parameter) of the attention
operations of AutoLA's pool (Eqs. 4-8) on a channel group of the cell -- a ``C / 4``-channel
slice of an NCHW tensor, as the cell gives them -- and of the projection phi (Eq. 3) on the
four nodes, at the three stages of a CIFAR ResNet-20 (batch 64: 16 channels at 32 x 32, 32 at
16 x 16, 64 at 8 x 8). "compiled": the modules with the kernels of :mod:`attnas.kernels` on
(one compiled autograd operation each, kernels ``attention_gates`` and ``fused_phi``);
"eager": the same modules with that kernel off (their PyTorch expressions). All are
interleaved round by round, in a new order every round; prints the medians, the speed-up
and the load average.

    PYTHONPATH=. python -m benchmarks.speed.bench_hoga_modules --threads 2 --repeats 21
"""

from __future__ import annotations

import statistics

STAGES = [(16, 32), (32, 16), (64, 8)]
OPS = ["se", "channel_v2", "spatial_d1", "spatial_d2", "norm_d1", "norm_d2", "cbam"]


def main() -> None:
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    import torch

    from attnas.kernels.attention_gates import kernels_apply
    from attnas.kernels.fused_phi import fused_applies
    from attnas.ops.autola.hoga_cell import HOGAProjection
    from attnas.ops.autola.attention_modules import create_attention
    from benchmarks._common import kernel_bench_args, kernels_off, medians, time_interleaved

    args = kernel_bench_args(__doc__)
    B = args.batch
    for C, S in STAGES:
        c = C // 4
        torch.manual_seed(0)
        x = torch.randn(B, C, S, S)[:, c:2 * c].requires_grad_()  # one channel group of the cell's input
        g = torch.randn(B, c, S, S)
        if not kernels_apply(x):
            raise SystemExit("the compiled kernels are unavailable (no compiler or ATTNAS_NO_KERNELS)")
        cases = {}
        for name in OPS:
            op = create_attention(name, c, 4)
            leaves = [x, *op.parameters()]
            cases[name] = (lambda f=op.forward, leaves=leaves: torch.autograd.grad(f(x), leaves, g),
                           kernels_off(lambda f=op.forward, leaves=leaves: torch.autograd.grad(f(x), leaves, g),
                                       "attention_gates"))
        phi = HOGAProjection(5 * c, C)
        nodes = [torch.randn(B, c, S, S, requires_grad=True) for _ in range(4)]
        assert fused_applies(phi, nodes)
        gp, leaves = torch.randn(B, C, S, S), [*nodes, *phi.parameters()]
        cases["phi"] = (lambda: torch.autograd.grad(phi.project(nodes), leaves, gp),
                        kernels_off(lambda: torch.autograd.grad(phi.project(nodes), leaves, gp), "fused_phi"))
        fns = {f"{n} {kind}": f for n, pair in cases.items() for kind, f in zip(("compiled", "eager"), pair)}
        for f in fns.values():
            f(), f()
        times, _, loads = time_interleaved(fns, args.repeats, shuffle=True)
        med = medians(times)
        load = statistics.median(v for vs in loads.values() for v in vs)
        print(f"stage ({B}, {c} of {C}, {S}, {S}), load {load:.2f}:")
        for n in cases:
            ours, ref = med[f"{n} compiled"], med[f"{n} eager"]
            print(f"  {n:10s} compiled {ours * 1e3:6.3f} ms  eager {ref * 1e3:6.3f} ms  speed-up {ref / ours:4.1f}x")


if __name__ == "__main__":
    main()
