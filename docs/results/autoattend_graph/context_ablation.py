"""Table 7 of AutoAttend: context-aware parameter sharing variants NC, SC, TC, FC.

For each variant, train the supernet exactly as the recipe does, then score 100
architectures sampled from the prior Γ(A) with the supernet's weights on the
validation nodes, and report their mean (and std). Each variant is a normal attnas run
(``one-shot-random`` with ``samples=100`` and no re-ranking), so its run directory holds
the events and checkpoints like any search.

Usage::

    python -m docs.results.autoattend_graph.context_ablation --recipe autoattend-cora --out runs/ablation-cora
    python -m docs.results.autoattend_graph.context_ablation --recipe autoattend-citeseer --out runs/ablation-citeseer
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="autoattend-cora")
    ap.add_argument("--out", default="runs/context-ablation")
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--contexts", default="nc,sc,tc,fc")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()

    import torch

    from attnas import pipeline
    from attnas.config import read_yaml, recipe_path

    torch.set_num_threads(args.threads)
    base = read_yaml(recipe_path(args.recipe))
    rows = {}
    for ctx in args.contexts.split(","):
        recipe = dict(base)
        recipe["name"] = f"{base['name']}-context-{ctx}"
        recipe["space"] = dict(base["space"], context=ctx)
        recipe["strategy"] = {"name": "one-shot-random", "supernet": base["strategy"]["supernet"],
                              "samples": args.samples, "rerank": {"top_k": 1, "epochs": 0}}
        recipe["retrain"] = dict(base.get("retrain", {}), epochs=1, patience=0)
        out = Path(args.out) / ctx
        t0 = time.time()
        if (out / "metrics.json").exists():
            run = pipeline.RunDir.open(out)
        elif (out / "config.yaml").exists():
            run = pipeline.resume(out)
        else:
            run = pipeline.search(recipe, args.overrides, out=out)
        scores = [e["accuracy"] for e in run.events("evolution")]
        rows[ctx] = {"mean_val_accuracy": statistics.fmean(scores), "std": statistics.stdev(scores),
                     "n": len(scores), "seconds": round(time.time() - t0, 1), "run": str(out)}
        print(ctx, json.dumps(rows[ctx]), f"load {os.getloadavg()[0]:.2f}", flush=True)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
