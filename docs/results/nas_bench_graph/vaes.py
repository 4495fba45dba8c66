"""The graph-VAE part of docs/results/nas_bench_graph.md: Table 2's analogue and latent BO's tests.

Reads the ``graph-vae`` runs on ``nbg-cora`` (``runs/nbg-vae-cora-<model>``, the four models
at 6 epochs and DVAE-EMB at 18, ``-e18``) and the
bench folder of latent BO (``runs/nbg-bo``), and prints (1) reconstruction accuracy and the
sparse GP's RMSE and Pearson's r predicting held-out validation performance from each
latent space, (2) paired tests at 100 queries, pooled over the eight datasets other than
proteins (per-seed mean) and per dataset: each latent BO against regularized evolution, and
each VAE with operation embeddings against the same VAE without::

    PYTHONPATH=. python -m docs.results.nas_bench_graph.vaes runs
"""

import json
import sys
from pathlib import Path

import numpy as np

from attnas.bench.summary import compare

MODELS = {"dvae": "D-VAE", "dvae-emb": "DVAE-EMB", "gcn": "GCN", "gcn-emb": "GCN-EMB",
          "dvae-emb-e18": "DVAE-EMB (18 epochs)"}
DATASETS = ("cora", "citeseer", "pubmed", "cs", "physics", "photo", "computers", "arxiv")
runs = Path(sys.argv[1] if len(sys.argv) > 1 else "runs")

print("| model | epochs | s/epoch | recon. acc. | validity | RMSE | Pearson's r |")
print("|---|---:|---:|---:|---:|---:|---:|")
for m, name in MODELS.items():
    path = runs / f"nbg-vae-cora-{m}" / "metrics.json"
    if path.exists():
        r = json.loads(path.read_text())
        print(f"| {name} | {r['vae_epochs']} | {r['vae_seconds_per_epoch']:.0f} | {r['recon_accuracy']:.3f} | "
              f"{r['validity']:.3f} | {r['rmse']:.3f} | {r['pearson_r']:.3f} |")


def cell(dataset: str, label: str) -> dict | None:
    safe = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in label)
    path = runs / "nbg-bo" / "cells" / dataset / f"{safe}-100.json"
    return json.loads(path.read_text()) if path.exists() else None


def row(a_label: str, b_label: str, a_name: str, b_name: str) -> None:
    a = [cell(d, a_label) for d in DATASETS]
    b = [cell(d, b_label) for d in DATASETS]
    if any(x is None for x in a + b):
        return
    per = [compare(x["test"], y["test"], a_name, b_name) for x, y in zip(a, b)]
    pooled = compare(np.mean([x["test"] for x in a], axis=0).tolist(), np.mean([y["test"] for y in b], axis=0).tolist(),
                     a_name, b_name)
    counts = {v: sum(p["verdict"] == v for p in per) for v in ("better", "not distinguishable", "worse")}
    print(f"| {a_name} vs {b_name} | {100 * pooled['diff_mean']:+.2f} | {pooled['p_value']:.2g} | "
          f"{counts['better']} / {counts['not distinguishable']} / {counts['worse']} | {pooled['n']} |")


bo = {m: f"table-latent-bo:vae_file=runs/nbg-vae-cora-{m}/vae.pt" for m in MODELS}
print()
print("| comparison (test, 100 queries) | pooled diff (points) | t-test p | datasets better / n.d. / worse | seeds |")
print("|---|---:|---:|---|---:|")
for m, name in MODELS.items():
    row(bo[m], "table-random", f"BO {name}", "random search")
for m, name in MODELS.items():
    row(bo[m], "regularized-evolution", f"BO {name}", "regularized evolution")
row(bo["dvae-emb-e18"], bo["dvae-emb"], "BO DVAE-EMB (18 epochs)", "BO DVAE-EMB (6 epochs)")
row(bo["dvae-emb"], bo["dvae"], "BO DVAE-EMB", "BO D-VAE")
row(bo["gcn-emb"], bo["gcn"], "BO GCN-EMB", "BO GCN")
