"""Speed of AutoLA's search and retraining steps against a plain ResNet-20 step.

Measures, in one run and interleaved (so that load on the machine hits all of them alike):

* ``plain``    -- one SGD training step of ResNet-20 (forward, backward, update);
* ``darts``    -- one first-order DARTS step of the ResNet-20 + HOGA supernet (every edge of
  every cell mixing all nine operations): an SGD weight step on a train_A batch, then an
  Adam step of alpha on a train_B batch (AutoLA Sec. 3.3, 4.2);
* ``discrete`` -- one SGD training step of ResNet-20 + the discrete HOGA cell of Figure 3
  (the network one retrains after the search).

Targets (issue 4): darts <= 3x plain, discrete <= 1.5x plain, at the same batch size.
Prints the median of each over the repeats (wall time and CPU time, ``time.process_time``),
the ratios of the medians, the load average and the page faults per step beside each figure;
threads are pinned.
All three steps use the same optimiser implementation (``--optim-impl``, default
``foreach``: the same arithmetic as the per-parameter loop, fewer kernel calls) and the same
allocator settings (``--malloc``, default ``attnas``: glibc keeps freed memory, as the
``attnas`` command sets it; ``default``: glibc's own thresholds).

    PYTHONPATH=. python -m benchmarks.speed.bench_autola_step --batch 64 --repeats 7 --threads 2

Options beyond the default (all off by default): ``--compile`` (torch.compile of the three
networks, compile time printed as the warm-up), ``--precision bf16`` (bf16 autocast of all
three steps), ``--breakdown`` (the pieces of one stage-1 block).
"""

from __future__ import annotations

import argparse
import os

from attnas.runtime.cpu_busy import choose_omp_wait_policy  # noqa: E402  (before torch: PASSIVE only on a busy machine)

choose_omp_wait_policy()

import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from benchmarks._common import darts_step, medians, time_interleaved, training_step  # noqa: E402


def main() -> None:
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--memory-format", choices=("channels_last", "contiguous"), default="channels_last")
    p.add_argument("--groups", type=int, default=4)
    p.add_argument("--device", default="cpu")
    p.add_argument("--cell", choices=("figure3", "hog_se", "hog_cbam"), default="figure3",
                   help="the discrete cell of the retraining step (Figure 3, or every edge SE / CBAM)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile all three networks (inductor; fuses the cells' element-wise work)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: autocast every step's forward to bfloat16 (an explicit option; fp32 is the default)")
    p.add_argument("--optim-impl", choices=("foreach", "loop"), default="foreach",
                   help="optimiser implementation of all three steps (same arithmetic)")
    p.add_argument("--no-darts", action="store_true",
                   help="time only the plain and the retrained steps (e.g. with --compile: the relaxed network's "
                        "compilation takes minutes)")
    p.add_argument("--malloc", choices=("attnas", "default"), default="attnas",
                   help="attnas: glibc keeps freed memory, as the attnas command sets it "
                        "(attnas.runtime.allocator.keep_freed_memory); default: glibc's own thresholds")
    p.add_argument("--breakdown", action="store_true",
                   help="also time one stage-1 block, the cells and phi (forward + backward) separately")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    from attnas.runtime.allocator import keep_freed_memory
    malloc = f"kept ({'applied' if keep_freed_memory() else 'not applied'})" if args.malloc == "attnas" else "default"
    torch.manual_seed(0)
    from attnas.models.hoga_networks import RelaxedHOGANetwork, hoga_network
    from attnas.models.resnet_cifar import cifar_resnet
    from attnas.ops.autola.hoga_cell import edge_keys
    from attnas.spaces.hoga import FIGURE3_EDGES

    dev = torch.device(args.device)
    fmt = torch.channels_last if args.memory_format == "channels_last" else torch.contiguous_format
    if args.cell == "figure3" and args.groups == 4:
        edges = FIGURE3_EDGES
    else:
        op = {"hog_se": "se", "hog_cbam": "cbam"}.get(args.cell, "cbam")
        edges = {k: op for k in edge_keys(args.groups)}

    def batch():
        x = torch.randn(args.batch, 3, 32, 32, device=dev).contiguous(memory_format=fmt)
        return x, torch.randint(0, 10, (args.batch,), device=dev)

    batch_a, batch_b = batch(), batch()

    plain = cifar_resnet("resnet20").to(dev, memory_format=fmt)
    supernet = None if args.no_darts else RelaxedHOGANetwork("resnet20", groups=args.groups).to(dev, memory_format=fmt)
    discrete = hoga_network("resnet20", edges, groups=args.groups).to(dev, memory_format=fmt)
    params = {"plain": list(plain.parameters()), "discrete": list(discrete.parameters())}
    if supernet is not None:
        params["weights"], params["alpha"] = supernet.weight_parameters(), supernet.arch_parameters()

    if args.compile:  # the step functions stay eager; the networks' forward and backward are compiled
        plain, discrete = torch.compile(plain), torch.compile(discrete)
        supernet = None if supernet is None else torch.compile(supernet)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def loss(model, b):
        if args.precision == "bf16":
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                return F.cross_entropy(model(b[0]).float(), b[1])
        return F.cross_entropy(model(b[0]), b[1])

    foreach = args.optim_impl == "foreach"
    steps = {"plain": training_step(plain, params["plain"], batch_a, loss, foreach)}
    if supernet is not None:
        steps["darts"] = darts_step(supernet, params["weights"], params["alpha"], batch_a, batch_b, loss, foreach)
    steps["discrete"] = training_step(discrete, params["discrete"], batch_a, loss, foreach)
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        for f in steps.values():
            f()
    sync()
    print(f"warm-up ({args.warmup} rounds{', compiling' if args.compile else ''}): {time.perf_counter() - t0:.1f} s")
    times, cpu, loads = time_interleaved(steps, args.repeats, sync)

    print(f"device={dev} threads={torch.get_num_threads()} OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} "
          f"batch={args.batch} memory_format={args.memory_format} groups={args.groups} cell={args.cell} "
          f"repeats={args.repeats} compile={args.compile} precision={args.precision} optim={args.optim_impl} "
          f"malloc={malloc} torch={torch.__version__}")
    med, cmed = medians(times), medians(cpu)
    faults = page_faults(steps, sync)
    for name in steps:
        print(f"  {name:9s} median {med[name] * 1e3:9.1f} ms  (min {min(times[name]) * 1e3:8.1f})  "
              f"CPU {cmed[name] * 1e3:9.1f} ms  load avg during: {statistics.median(loads[name]):.2f}  "
              f"page faults/step {faults[name]:.0f}")
    if "darts" in med:
        darts_ratio = med["darts"] / med["plain"]
        print(f"  darts / plain    = {darts_ratio:5.2f}x   (target <= 3x)   {'OK' if darts_ratio <= 3 else 'MISSED'}"
              f"   CPU-time ratio {cmed['darts'] / cmed['plain']:5.2f}x")
    disc_ratio = med["discrete"] / med["plain"]
    print(f"  discrete / plain = {disc_ratio:5.2f}x   (target <= 1.5x) {'OK' if disc_ratio <= 1.5 else 'MISSED'}"
          f"   CPU-time ratio {cmed['discrete'] / cmed['plain']:5.2f}x")
    print(f"  load average now: {os.getloadavg()}")
    if args.breakdown:
        breakdown(args, dev, fmt, edges, sync)


def page_faults(steps: dict, sync, rounds: int = 3) -> dict[str, float]:
    """Minor page faults per step of each step (median of ``rounds`` after the timing): the
    first touches of memory the allocator took from the system (``--malloc``)."""
    import resource

    counts: dict[str, list[int]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, f in steps.items():
            sync()
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            f()
            sync()
            counts[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return {name: statistics.median(v) for name, v in counts.items()}


def breakdown(args, dev, fmt, edges, sync) -> None:
    """Forward + backward of the pieces of one stage-1 block (16 channels, 32 x 32), interleaved."""
    from attnas.models.resnet_cifar import BasicBlock
    from attnas.ops.autola.hoga_cell import HOGA, HOGAProjection
    from attnas.ops.autola.hoga_relaxed import RelaxedHOGA

    C, S, K = 16, 32, args.groups
    c = C // K

    def tensor(ch):
        return torch.randn(args.batch, ch, S, S, device=dev).contiguous(memory_format=fmt)

    x, g = tensor(C).requires_grad_(), tensor(C)
    # inside the cell (CPU): the edges get a channel group of the NCHW input, phi NCHW nodes
    nchw = fmt if dev.type != "cpu" else torch.contiguous_format
    xc = torch.randn(args.batch, C, S, S, device=dev).contiguous(memory_format=nchw)[:, :c].requires_grad_()
    gc = torch.randn(args.batch, c, S, S, device=dev).contiguous(memory_format=nchw)
    xphi = tensor((K + 1) * c).requires_grad_()
    block = BasicBlock(C, C).to(dev, memory_format=fmt)
    discrete = HOGA(C, edges, K).to(dev, memory_format=fmt)
    relaxed = RelaxedHOGA(C, K).to(dev, memory_format=fmt)
    phi = HOGAProjection((K + 1) * c, C).to(dev, memory_format=fmt)
    parts = {"block": lambda: block(x).backward(g), "discrete cell": lambda: discrete(x).backward(g),
             "relaxed cell": lambda: relaxed(x).backward(g), "phi": lambda: phi(xphi).backward(g)}
    if hasattr(phi, "project"):  # the folded phi the cells use (U_bar folded into conv1)
        nodes = [torch.randn(args.batch, c, S, S, device=dev).contiguous(memory_format=nchw).requires_grad_()
                 for _ in range(K)]
        parts["phi folded (from the K nodes)"] = lambda: phi.project(nodes).backward(g)
    for key, op in discrete.ops.items():
        if discrete.choices[key] not in ("identity", "zero"):
            parts[f"edge {key} {discrete.choices[key]} (C/K ch)"] = lambda op=op: op(xc).backward(gc)
    for f in parts.values():
        f()
    med = medians(time_interleaved(parts, args.repeats, sync)[0])
    print(f"breakdown, stage 1 ({C} channels, {S}x{S}, batch {args.batch}), forward + backward, "
          f"load avg {os.getloadavg()[0]:.2f}:")
    for k, v in med.items():
        print(f"  {k:32s} {v * 1e3:8.1f} ms  = {v / med['block']:5.2f} x block")


if __name__ == "__main__":
    main()
