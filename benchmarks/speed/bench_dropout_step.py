"""Supernet steps with the splitmix64 dropout mask against the ``rand_like >= p`` mask, in one process.

The AutoAttend text supernet of issue 3's speed target (24 layers, hidden 64, batch 128,
SST-5, one architecture from the prior per step, Adam lr 0.005, clipping 5), trained with
the two dropout-mask implementations swapped step by step on the same batches and
architectures (their order alternates, the first two steps are warm-up). Whole-epoch times
vary by about 10 % from one process to the next; this ratio does not. Prints the summed
and median step times and the ratio, with the load average.

    PYTHONPATH=. python -m benchmarks.speed.bench_dropout_step --threads 2 --steps 30
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time


def main() -> None:
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30, help="steps per implementation (2 of them warm-up)")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    import torch

    import attnas.ops.shared.dropout as dropout
    from attnas.data.root import resolve_data_root
    from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
    from attnas.strategies.one_shot_config import SupernetConfig
    from attnas.tasks.text_classification import TextClassificationConfig, TextClassificationTask
    from attnas.training.train import make_optimizer
    from bench_autoattend_text import supernet_step  # the same step as the epoch benchmark

    torch.set_num_threads(args.threads)
    task = TextClassificationTask(TextClassificationConfig(dataset="sst5", bucket=8), resolve_data_root(args.data_dir))
    space = AutoAttendSpace(AutoAttendConfig(layers=args.layers, hidden=64, pool="text", heads=8, context="fc",
                                             dropout=0.1, attn_dropout=0.1))
    torch.manual_seed(0)
    supernet = space.supernet(task).train()
    params = list(supernet.parameters())
    cfg = SupernetConfig(epochs=1, lr=0.005, weight_decay=0.0, grad_clip=5.0, batch_size=128)
    opt = make_optimizer(params, cfg)
    rng = random.Random(0)
    batches = list(task.batches("train", shuffle=True, generator=torch.Generator().manual_seed(1)))

    def rand_mask(x, p, seed=None):  # the mask before: torch's serial uniform_, then a threshold
        return torch.rand_like(x).ge_(p).mul_(1.0 / (1.0 - p))

    impls = {"rand_like >= p": rand_mask, "splitmix64": dropout.dropout_mask}

    def step(batch, arch) -> None:
        supernet_step(task, supernet, params, opt, cfg.grad_clip, batch, arch)

    times: dict[str, list[float]] = {k: [] for k in impls}
    load_before = os.getloadavg()
    try:
        for i in range(args.steps):
            batch, arch = batches[i % len(batches)], space.sample(rng)
            for name in (list(impls) if i % 2 == 0 else list(reversed(impls))):
                dropout.dropout_mask = impls[name]
                t0 = time.perf_counter()
                step(batch, arch)
                if i >= 2:
                    times[name].append(time.perf_counter() - t0)
    finally:
        dropout.dropout_mask = impls["splitmix64"]
    old, new = (sum(times[k]) for k in impls)
    for name, ts in times.items():
        print(f"{name:>15}: {len(ts)} steps, sum {sum(ts):.2f} s, median {statistics.median(ts) * 1000:.0f} ms")
    print(f"splitmix64 / rand_like step time: {new / old:.3f} (threads {args.threads}; load average "
          f"{'/'.join(f'{x:.2f}' for x in load_before)} -> {'/'.join(f'{x:.2f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
