"""The quick operation-embeddings ENAS run (recipe ``opemb-enas-quick``), timed.

Usage (from the repository root)::

    PYTHONPATH=. python -m docs.results.opemb.quick [--data-dir DIR] [--out DIR] [--threads 1]
        [--set strategy.model=dvae ...]

Runs ``attnas search opemb-enas-quick`` (a small DVAE-EMB trained 2 epochs, then Table 1,
Table 2, the graph-property correlations, a t-SNE figure and one latent-BO round) and
prints its metrics as JSON together with the wall time, the process CPU time, the torch
thread count and the load average before and after. The recipe is meant to finish in
under 5 minutes on two CPU cores and reach ``pearson_r >= 0.5`` on the test split.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from attnas import pipeline


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: fastest on a shared 2-core machine)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="recipe override key=value")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    wall, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "run"
        run = pipeline.search("opemb-enas-quick", args.overrides, out=out, data_dir=args.data_dir)
        metrics = run.read_json("metrics.json")
    metrics.update(wall_seconds=round(time.perf_counter() - wall, 1), cpu_seconds=round(time.process_time() - cpu, 1),
                   threads=torch.get_num_threads(), loadavg_before=load_before, loadavg_after=os.getloadavg())
    print(json.dumps(metrics, indent=1))


if __name__ == "__main__":
    main()
