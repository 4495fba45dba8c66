"""D-VAE encoder on AutoAttend DAGs: level-by-level sweep against the vertex-by-vertex sweep.

Usage (from the repository root)::

    PYTHONPATH=. python -m benchmarks.speed.bench_dvae_levels [--threads 1] [--graphs 512] [--repeats 5]

AutoAttend's DAGs (``autoattend`` space, 2 layers: 10 vertices in 6 topological levels)
are encoded forward and backward (one training step of the encoder, batch 32) by the
same encoder with both sweeps of :class:`~attnas.graphvae.dvae_encoder.DVAEEncoder`,
alternating batch by batch so both see the same load. Prints the median CPU and wall time
per batch of each over ``--repeats`` passes, their ratio, and the load average.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import torch

from attnas.graphvae.aggregation import descriptor_features
from attnas.graphvae.dvae_encoder import DVAEEncoder, topological_levels
from attnas.graphvae.space_dags import space_dataset
from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--graphs", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=501)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    torch.set_num_threads(args.threads)
    space = AutoAttendSpace(AutoAttendConfig())
    rng = random.Random(0)
    data = space_dataset(space, [space.sample(rng) for _ in range(args.graphs)])
    torch.manual_seed(0)
    enc = DVAEEncoder(x_dim=data.num_types, hidden=args.hidden, latent=56, max_nodes=data.max_nodes)
    batches = [b for b, _ in data.batches(32, shuffle=False)]
    levels = int(topological_levels(batches[0].adj.float())[0].max()) + 1
    print(f"# torch {torch.__version__}, threads={torch.get_num_threads()}, hidden={args.hidden}, "
          f"{len(batches)} batches of 32 AutoAttend DAGs, {data.max_nodes} vertices, {levels} levels (first graph)")
    print(f"# start load {os.getloadavg()}")

    def step(b, by_level: bool) -> tuple[float, float]:
        w, c = time.perf_counter(), time.process_time()
        x = torch.eye(data.num_types)[b.types]
        feats = descriptor_features(enc.message_input, x, enc.max_nodes)
        adj = b.adj.float()
        real = torch.arange(b.types.shape[1]).unsqueeze(0) < b.n_nodes.unsqueeze(1)
        total = 0.0
        for reverse in (False, True):
            if by_level:
                s = enc._sweep_by_level(x, feats, adj, reverse, topological_levels(adj, reverse), real)
            else:
                s = enc._sweep_by_index(x, feats, adj, reverse)
            total = total + s.sum()
        total.backward()
        enc.zero_grad(set_to_none=True)
        return time.perf_counter() - w, time.process_time() - c

    res = {True: ([], []), False: ([], [])}
    for _ in range(args.repeats):
        per = {True: ([], []), False: ([], [])}
        for b in batches:
            for mode in (True, False):
                w, c = step(b, mode)
                per[mode][0].append(w)
                per[mode][1].append(c)
        for mode in (True, False):
            res[mode][0].append(statistics.median(per[mode][0]))
            res[mode][1].append(statistics.median(per[mode][1]))
    load = os.getloadavg()
    med = {m: (statistics.median(res[m][0]), statistics.median(res[m][1])) for m in res}
    for mode, name in ((False, "vertex by vertex"), (True, "level by level")):
        print(f"{name:17s} wall {med[mode][0] * 1000:7.1f} ms/batch   cpu {med[mode][1] * 1000:7.1f} ms/batch   [load {load}]")
    print(f"level sweep / vertex sweep: cpu x{med[True][1] / med[False][1]:.2f}, wall x{med[True][0] / med[False][0]:.2f}")


if __name__ == "__main__":
    main()
