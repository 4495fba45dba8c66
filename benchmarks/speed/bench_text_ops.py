"""Time one forward + backward of every text operation (AutoAttend Table 3) on CPU.

Usage::

    PYTHONPATH=. python -m benchmarks.speed.bench_text_ops [--threads 2] [--repeats 30] \
        [--batch 128] [--length 64] [--hidden 64] [--lengths full|sst|both]

``--lengths full``: every sequence has ``--length`` real tokens (no padding);
``--lengths sst``: lengths drawn from the SST-5 training sentences (needs the data root:
``--data-dir`` or ``$ATTNAS_DATA``), padded to the batch's longest, as the task batches.

Each figure is the median over ``--repeats`` rounds (after 3 warm-up rounds) with
``torch.set_num_threads`` pinned; every round times every operation once, so all see
the same machine load. Figures are printed with the 1-minute load average over the
rounds and as a ratio to a plain ``Linear(H, H)`` forward + backward on the same tensor
in the same rounds (ratios are steadier than milliseconds on a shared machine).

The last lines project the cost of one 24-layer sampled architecture per batch from
these figures, under stated assumptions (a rough guide to the issue's supernet-epoch
target of 30 s over 8,544 sentences = 67 batches, i.e. about 0.45 s per batch).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from attnas import registry
from attnas.ops.autoattend.sequence_attention import SequenceAttention
from attnas.ops.autoattend.sequence_context import SequenceContext
from attnas.ops.autoattend.text import BASELINE_TEXT_POOL, GRUOp, MaxPool3


def sst_lengths(data_dir: str | None) -> list[int]:
    root = Path(data_dir or os.environ.get("ATTNAS_DATA", ""))
    path = root / "sst" / "train.txt"
    if not path.is_file():
        raise SystemExit(f"--lengths sst needs {path} (set --data-dir or ATTNAS_DATA)")
    return [len(re.findall(r"\(\d ([^()\s]+)\)", line)) for line in path.open(encoding="utf-8")]


def fwd_bwd(module: torch.nn.Module, x: torch.Tensor, ctx: SequenceContext, n_inputs: int = 1) -> Callable[[], None]:
    def run() -> None:
        x.grad = None
        out = module(*([x] * n_inputs), ctx)
        if out.requires_grad:
            out.sum().backward()
    return run


class MaxPool3Autograd(MaxPool3):
    """``max_pool3`` with autograd's backward through ``torch.maximum`` (the round-4 code)."""

    def forward(self, x: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        h = ctx.lowest_at_pads(self.norm(x))
        hp = torch.nn.functional.pad(h, (0, 0, 1, 1), value=torch.finfo(h.dtype).min)
        return ctx.zero_pads(torch.maximum(torch.maximum(hp[:, :-2], hp[:, 1:-1]), hp[:, 2:]))


def bench(args: argparse.Namespace, lengths: torch.Tensor, label: str) -> dict[str, float]:
    B, H = lengths.shape[0], args.hidden
    L = int(lengths.max())
    torch.manual_seed(0)
    ctx = SequenceContext.from_lengths(lengths, L)
    x = ctx.zero_pads(torch.randn(B, L, H)).requires_grad_(True)
    ref = torch.nn.Linear(H, H)
    cases: list[tuple[str, Callable[[], None]]] = [("Linear(H,H) reference", lambda: ref(x).sum().backward())]
    modules = [(name, registry.create("op", name, H, group="text", dropout=0.1), 1) for name in BASELINE_TEXT_POOL]
    modules += [("max_pool3 autograd (rd 4)", MaxPool3Autograd(H), 1),
                ("gru packed (round 3)", GRUOp(H, dropout=0.1, implementation="packed"), 1),
                ("gru directions=concat", GRUOp(H, dropout=0.1, directions="concat"), 1),
                ("gru directions=forward", GRUOp(H, dropout=0.1, directions="forward"), 1),
                ("attention layer (Eq. 8)", SequenceAttention(H, 8, dropout=0.1), 3)]
    for name, module, n_inputs in modules:
        module.train()
        cases.append((name, fwd_bwd(module, x, ctx, n_inputs)))
    # round-robin: every operation is timed once per round, so all see the same machine load
    times: dict[str, list[float]] = {name: [] for name, _ in cases}
    loads = []
    for r in range(args.repeats + 3):
        for name, fn in cases:
            t0 = time.perf_counter()
            fn()
            if r >= 3:  # warm-up rounds
                times[name].append(time.perf_counter() - t0)
        loads.append(os.getloadavg()[0])
    results = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    t_ref = results["Linear(H,H) reference"]
    print(f"\n[{label}] B={B} L={L} (mean real length {lengths.float().mean():.1f}) H={H} "
          f"threads={torch.get_num_threads()}, load average during the rounds {min(loads):.2f}..{max(loads):.2f}")
    print(f"{'operation':<26}{'median ms':>10}{'x Linear':>10}")
    for name, ms in results.items():
        print(f"{name:<26}{ms:10.2f}{ms / t_ref:10.2f}")
    # rough projection for one 24-layer sampled architecture (see the module docstring)
    ops = ["zero", "identity", "conv1", "conv3", "max_pool3", "gru"]
    mean_op = statistics.mean(results[o] for o in ops)
    nonzero = statistics.mean(results[o] for o in ops if o != "zero")
    b = len(ops)
    p_att = (b - 1) ** 3 / ((b - 1) ** 3 + b * (b - 1))  # share of attention layers if uniform over the space
    per_layer = (1 - p_att) * (nonzero + mean_op) + p_att * (3 * nonzero + results["attention layer (Eq. 8)"])
    print(f"projection: 24 layers x ({1 - p_att:.2f} addition [1 non-zero + 1 any op] + {p_att:.2f} attention "
          f"[3 non-zero ops + attention]) = {24 * per_layer / 1e3:.3f} s per batch of {B} "
          f"(ops only; stem, head, optimiser and supernet bookkeeping not included)")
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lengths", choices=["full", "sst", "both"], default="both")
    p.add_argument("--data-dir", default=None)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads pinned to {torch.get_num_threads()}, "
          f"load average at start {os.getloadavg()}")
    if args.lengths in ("full", "both"):
        bench(args, torch.full((args.batch,), args.length), "full length")
    if args.lengths in ("sst", "both"):
        try:
            pool = [min(n, args.length) for n in sst_lengths(args.data_dir)]
        except SystemExit as exc:
            if args.lengths == "sst":
                raise
            print(f"\n[SST lengths] skipped: {exc}")
            return
        rng = random.Random(0)
        bench(args, torch.tensor(rng.sample(pool, args.batch)), "SST-5 lengths, padded to the batch's longest")


if __name__ == "__main__":
    main()
