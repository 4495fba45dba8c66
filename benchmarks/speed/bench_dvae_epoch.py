"""Seconds per training epoch of the graph VAEs on ENAS (batch 32), extrapolated.

Usage (from the repository root)::

    PYTHONPATH=. python -m benchmarks.speed.bench_dvae_epoch [--threads 2 | --threads 1 2] [--steps 10] [--repeats 3]
        [--models D-VAE DVAE-EMB GCN GCN-EMB] [--precision fp32 bf16]
        [--flops] [--hidden 501] [--reference-steps 1] [--whole-epoch]

The speed target of issue 7 (D-VAE at most 60 s per epoch on two cores, GCN faster) is the
``D-VAE fp32`` line of::

    PYTHONPATH=. python -m benchmarks.speed.bench_dvae_epoch --threads 1 2 --models D-VAE GCN

(the ``TARGET`` lines; ``--threads 1 2`` times both thread counts in the same rounds and
prints the two-thread speed-up).

Every model is built at the paper's sizes (hidden 501, latent 56). Training steps
(forward, backward, fused Adam) on batches of 32 ENAS training graphs are timed round-robin:
each round runs one step of every variant in turn, so all variants see the same machine
load, and the ratios between them are measured in one run. After two warm-up rounds,
``--steps`` rounds are timed per repeat; per variant the median over repeats of the median
step time, times the 535 steps of an epoch over the 17,118 training graphs, is reported:
an extrapolation from a fixed fraction of the epoch, stated as such.

Variants: every model of ``--models`` at every precision of ``--precision`` (``bf16``:
the loss under bf16 autocast, the explicit ``precision: bf16`` training option; fp32 is
the default and the paper's); and, with ``--reference-steps``, D-VAE's loss computed one
graph, vertex and candidate edge at a time as D-VAE's public code does
(:mod:`attnas.graphvae.reference_dvae`), timed on its own.

Wall time and process CPU time are both printed, with the load average and the ratio
to ``D-VAE fp32`` of the same rounds. On a shared machine the wall time grows with the
other processes' load; with one thread the CPU time is close to what the step costs on
an idle core. With two threads, the wall time on a quiet machine is the figure. On a
loaded machine two OpenMP threads spin-wait for each other's descheduled peer and a step
can take several times longer than with one thread; ``OMP_WAIT_POLICY=PASSIVE`` avoids
that collapse (it cannot create a speed-up when the cores are busy).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import torch

from attnas.data.enas import load_enas6
from attnas.graphvae.vae import GraphVAE, paper_model, precision_context

BATCH = 32


def _load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def _batched_loss(model, b):
    return model.loss(b)["loss"]


def _reference_loss(model, b):
    from attnas.graphvae.reference_dvae import encode_one, log_likelihood_one

    total = 0.0
    for i in range(len(b)):
        types, adj, n = b.types[i].tolist(), b.adj[i].tolist(), int(b.n_nodes[i])
        mu, logvar = encode_one(model, types, adj, n)
        z = model.reparameterize(mu, logvar)
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        total = total - log_likelihood_one(model, z, types, adj, n) + model.config.beta * kld
    return total


class Variant:
    def __init__(self, label, model_name, data, hidden, precision="fp32", loss=_batched_loss):
        torch.manual_seed(0)
        self.label = label
        self.model = GraphVAE(paper_model(model_name, hidden=hidden), data.num_types, data.max_nodes)
        self.model.train()
        self.precision = precision
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4, fused=True)  # as attnas.graphvae.train
        self.loss = loss
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def step(self, batch, record: bool) -> None:
        w, c = time.perf_counter(), time.process_time()
        self.opt.zero_grad(set_to_none=True)
        with precision_context(self.precision):  # as attnas.graphvae.train.train_epoch
            loss = self.loss(self.model, batch)
        loss.backward()
        self.opt.step()
        if record:
            self.wall.append(time.perf_counter() - w)
            self.cpu.append(time.process_time() - c)


def run_round_robin(variants, data, steps, repeats, seed=0, threads=(None,)):
    """Median step times (wall, cpu) per ``(label, threads)``: every round steps every variant
    at every thread count in turn, so all of them see the same load."""
    gen = torch.Generator().manual_seed(seed)
    walls = {(v.label, t): [] for v in variants for t in threads}
    cpus = {(v.label, t): [] for v in variants for t in threads}
    for _ in range(repeats):
        rec = {key: ([], []) for key in walls}
        batches = [b for _, (b, _y) in zip(range(steps + 2), data.batches(BATCH, shuffle=True, generator=gen))]
        for i, b in enumerate(batches):
            for t in threads:
                if t is not None:
                    torch.set_num_threads(t)
                for v in variants:
                    v.wall, v.cpu = rec[(v.label, t)]
                    v.step(b, record=i >= 2)
        for key, (w, c) in rec.items():
            walls[key].append(statistics.median(w))
            cpus[key].append(statistics.median(c))
    return {k: statistics.median(x) for k, x in walls.items()}, {k: statistics.median(x) for k, x in cpus.items()}


def _matmul_gflops(hidden: int, dtype=torch.float32, seconds: float = 2.0) -> float:
    """CPU-time GFLOP/s of ``(32, hidden) @ (hidden, 3 * hidden)`` (a GRU gate product at batch 32)."""
    a, w = torch.randn(BATCH, hidden, dtype=dtype), torch.randn(hidden, 3 * hidden, dtype=dtype)
    n, t = 0, time.process_time()
    while time.process_time() - t < seconds:
        a @ w
        n += 1
    return n * 2 * BATCH * hidden * 3 * hidden / (time.process_time() - t) / 1e9


def report_flops(variants, data, hidden, per_epoch, cpu) -> None:
    """Floating-point operations per training step, and the epoch time at the matmul rate."""
    from torch.utils.flop_counter import FlopCounterMode

    batch = next(iter(data.batches(BATCH, shuffle=False)))[0]
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the matmul rate of one core
    peaks = {}
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        if any(v.precision == precision for v in variants):
            peaks[precision] = _matmul_gflops(hidden, dtype)
            print(f"# plain {precision} matmul {BATCH}x{hidden}x{3 * hidden}: {peaks[precision]:.1f} GFLOP/s "
                  f"(cpu time per thread)   [{_load()}]")
    for v in variants:
        counter = FlopCounterMode(display=False)
        with counter:
            with precision_context(v.precision):
                loss = v.loss(v.model, batch)
            loss.backward()
        v.model.zero_grad(set_to_none=True)
        gflop = counter.get_total_flops() / 1e9
        floor = gflop / peaks[v.precision] * per_epoch
        print(f"{v.label:16s} {gflop:6.2f} GFLOP/step; at the {v.precision} matmul rate {floor:6.1f} s/epoch of cpu; "
              f"measured cpu {cpu[v.label] * per_epoch:6.1f} s/epoch = {floor / (cpu[v.label] * per_epoch):.0%} of that rate")
    torch.set_num_threads(before)


def report_whole_epochs(models, data, hidden: int, precision: str, threads: int) -> None:
    """Time one whole epoch per model as training runs it (``train_epoch``: every batch, the
    shuffling, the per-batch loss read-out), from a fresh model."""
    from attnas.graphvae.train import VAETrainConfig, new_state, train_epoch

    torch.set_num_threads(threads)
    for name in models:
        state = new_state(paper_model(name, hidden=hidden), data.num_types, data.max_nodes,
                          VAETrainConfig(epochs=1, precision=precision))
        before = _load()
        w, c = time.perf_counter(), time.process_time()
        record = train_epoch(state, data)
        w, c = time.perf_counter() - w, time.process_time() - c
        print(f"WHOLE EPOCH {name} {precision} at {threads} thread(s): {w:.1f} s wall, {c:.1f} CPU-s "
              f"({len(data)} graphs, loss per graph {record['loss']:.3f})   [{before} -> {_load()}]")


def main() -> None:
    ap = argparse.ArgumentParser(description="seconds per graph-VAE training epoch on ENAS")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--threads", type=int, nargs="+", default=[2],
                    help="torch thread counts; several (e.g. 1 2) are timed in the same rounds, with the speed-up")
    ap.add_argument("--steps", type=int, default=10, help="timed round-robin rounds per repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=501)
    ap.add_argument("--models", nargs="+", default=["D-VAE", "DVAE-EMB", "GCN", "GCN-EMB"])
    ap.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"],
                    help="time every model at these precisions (bf16: the explicit precision option)")
    ap.add_argument("--reference-steps", type=int, default=0, help="steps of the per-graph reference (0: skip)")
    ap.add_argument("--whole-epoch", action="store_true",
                    help="also time one whole training epoch of each model (attnas.graphvae.train.train_epoch, "
                         "every batch, the first precision of --precision), not an extrapolation")
    ap.add_argument("--flops", action="store_true",
                    help="also count each step's floating-point operations and time a plain matrix product of the "
                         "GRU's shape: the matmul-bound floor of an epoch on this machine, measured in the same run")
    args = ap.parse_args()
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    torch.set_num_threads(args.threads[0])
    data = load_enas6(args.data_dir).train
    per_epoch = math.ceil(len(data) / BATCH)
    print(
        f"# torch {torch.__version__}, threads={args.threads} (torch.set_num_threads), batch={BATCH}, "
        f"hidden={args.hidden}; s/epoch = median step time x {per_epoch} steps (extrapolated from {args.repeats} "
        f"repeats x {args.steps} round-robin steps)"
    )
    print(f"# start {_load()}")
    variants = [Variant(f"{m} {p}", m, data, args.hidden, precision=p) for m in args.models for p in args.precision]
    wall, cpu = run_round_robin(variants, data, args.steps, args.repeats, threads=args.threads)
    load = _load()
    for t in args.threads:
        print(f"# {t} thread(s)")
        base, base_cpu = wall.get(("D-VAE fp32", t)), cpu.get(("D-VAE fp32", t))
        for v in variants:
            w, c = wall[(v.label, t)], cpu[(v.label, t)]
            ratio = f"  x{w / base:.2f} wall, x{c / base_cpu:.2f} cpu of D-VAE fp32" if base else ""
            print(
                f"{v.label:16s} wall {w * 1000:7.1f} ms/step = {w * per_epoch:6.1f} s/epoch   "
                f"cpu {c * 1000:7.1f} ms/step = {c * per_epoch:6.1f} s/epoch{ratio}   [{load}]"
            )
    if len(args.threads) > 1:
        t0, t1 = args.threads[0], args.threads[-1]
        print(f"# wall speed-up from {t0} to {t1} threads (same rounds): "
              + ", ".join(f"{v.label} x{wall[(v.label, t0)] / wall[(v.label, t1)]:.2f}" for v in variants))
    for t in args.threads:
        for label in ("D-VAE fp32", "D-VAE bf16"):
            if (label, t) in wall:
                sec = wall[(label, t)] * per_epoch
                verdict = ("met" if sec <= 60 else "missed") if t >= 2 else "not applicable to one thread"
                gcn = wall.get((label.replace("D-VAE", "GCN"), t))
                gcn_txt = f"; GCN {gcn * per_epoch:.1f} s/epoch ({'faster' if gcn < wall[(label, t)] else 'not faster'})" if gcn else ""
                print(f"TARGET {label} at {t} thread(s): {sec:.1f} s/epoch wall (target <= 60 on two cores: {verdict})"
                      f"{gcn_txt}   [{load}]")
    cpu = {label: c for (label, t), c in cpu.items() if t == args.threads[0]}  # --flops: the first thread count
    if args.flops:
        report_flops(variants, data, args.hidden, per_epoch, cpu)
    if args.whole_epoch:
        report_whole_epochs(args.models, data, args.hidden, args.precision[0], args.threads[-1])
    if "D-VAE" in args.models and args.reference_steps > 0:
        ref = Variant("per-graph", "D-VAE", data, args.hidden, loss=_reference_loss)
        main_v = Variant("D-VAE", "D-VAE", data, args.hidden)
        w2, c2 = run_round_robin([main_v, ref], data, args.reference_steps, 1, seed=1)
        w2 = {label: x for (label, _t), x in w2.items()}
        c2 = {label: x for (label, _t), x in c2.items()}
        print(
            f"{'per-graph reference':20s} wall {w2['per-graph']:.2f} s/step = {w2['per-graph'] * per_epoch:7.0f} s/epoch, "
            f"cpu {c2['per-graph'] * per_epoch:7.0f} s/epoch; batched D-VAE is x{w2['per-graph'] / w2['D-VAE']:.1f} faster "
            f"(wall, same rounds)   [{_load()}]"
        )


if __name__ == "__main__":
    main()
