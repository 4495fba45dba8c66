"""The graph-VAE part of docs/results/nas_bench_graph.md: Table 2's analogue and latent BO's tests.

Reads the ``graph-vae`` runs (``runs/nbg-vae-cora-<model>``: the four models on cora's DAGs;
``runs/nbg-vae-proteins-dvae-emb``: proteins' five-operation space), the bench folder of
latent BO on the eight datasets (``runs/nbg-bo``) and on proteins (``runs/nbg-bo-proteins``),
and prints (1) reconstruction accuracy and the sparse GP's RMSE and Pearson's r predicting
held-out validation performance from each latent space, (2) paired tests at 100 queries,
pooled over the eight datasets other than proteins (per-seed mean), with the validation
difference beside the test one: latent BO with the default settings and with
``SETTING`` against random search and regularized evolution, each VAE with operation
embeddings against the same VAE without, (3) the same per dataset, (4) proteins::

    PYTHONPATH=. python -m docs.results.nas_bench_graph.vaes runs
"""

import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import t

from attnas.bench.summary import compare

MODELS = {"dvae": "D-VAE", "dvae-emb": "DVAE-EMB", "gcn": "GCN", "gcn-emb": "GCN-EMB"}
DATASETS = ("cora", "citeseer", "pubmed", "cs", "physics", "photo", "computers", "arxiv")
#: The settings chosen on validation (docs/results/nas_bench_graph/bo_settings.py).
SETTING = "around_best=5,batch=5"
runs = Path(sys.argv[1] if len(sys.argv) > 1 else "runs")

print("| model | epochs | s/epoch | recon. acc. | validity | RMSE | Pearson's r |")
print("|---|---:|---:|---:|---:|---:|---:|")
for folder, name in [*((f"nbg-vae-cora-{m}", n) for m, n in MODELS.items()),
                     ("nbg-vae-proteins-dvae-emb", "DVAE-EMB (proteins)")]:
    path = runs / folder / "metrics.json"
    if path.exists():
        r = json.loads(path.read_text())
        print(f"| {name} | {r['vae_epochs']} | {r['vae_seconds_per_epoch']:.0f} | {r['recon_accuracy']:.3f} | "
              f"{r['validity']:.3f} | {r['rmse']:.3f} | {r['pearson_r']:.3f} |")


def cell(bench: str, dataset: str, label: str) -> dict | None:
    safe = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in label)
    path = runs / bench / "cells" / dataset / f"{safe}-100.json"
    return json.loads(path.read_text()) if path.exists() else None


def row(a_label: str, b_label: str, a_name: str, b_name: str, datasets=DATASETS, bench: str = "nbg-bo") -> None:
    a = [cell(bench, d, a_label) for d in datasets]
    b = [cell(bench, d, b_label) for d in datasets]
    if any(x is None for x in a + b):
        return
    per = [compare(x["test"], y["test"], a_name, b_name) for x, y in zip(a, b)]
    pooled = compare(np.mean([x["test"] for x in a], axis=0).tolist(), np.mean([y["test"] for y in b], axis=0).tolist(),
                     a_name, b_name)
    val = 100 * np.mean(np.subtract(np.mean([x["val"] for x in a], axis=0), np.mean([y["val"] for y in b], axis=0)))
    counts = {v: sum(p["verdict"] == v for p in per) for v in ("better", "not distinguishable", "worse")}
    half = 100 * t.ppf(0.975, pooled["n"] - 1) * pooled["diff_std"] / np.sqrt(pooled["n"])
    print(f"| {a_name} vs {b_name} | {100 * pooled['diff_mean']:+.2f} (±{half:.2f}) | {pooled['p_value']:.2g} | "
          f"{val:+.2f} | {counts['better']} / {counts['not distinguishable']} / {counts['worse']} | {pooled['n']} |")


default = {m: f"table-latent-bo:vae_file=runs/nbg-vae-cora-{m}/vae.pt" for m in MODELS}
chosen = {m: f"{label},{SETTING}" for m, label in default.items()}
print()
print("| comparison (100 queries) | pooled test diff (points, 95 % CI) | t-test p | val. diff | "
      "datasets better / n.d. / worse | seeds |")
print("|---|---:|---:|---:|---|---:|")
for baseline, name in (("table-random", "random search"), ("regularized-evolution", "regularized evolution")):
    row(default["dvae-emb"], baseline, "BO DVAE-EMB, default", name)
    for m, model in MODELS.items():
        row(chosen[m], baseline, f"BO {model}, {SETTING}", name)
row(chosen["dvae-emb"], default["dvae-emb"], f"BO DVAE-EMB, {SETTING}", "default")
row(chosen["dvae-emb"], chosen["dvae"], "BO DVAE-EMB", "BO D-VAE")
row(chosen["gcn-emb"], chosen["gcn"], "BO GCN-EMB", "BO GCN")

print()
labels = [("table-random", "table-random"), ("regularized-evolution", "regularized-evolution"),
          (default["dvae-emb"], "BO DVAE-EMB default"), *((chosen[m], f"BO {n}") for m, n in MODELS.items())]
cells = {(d, name): cell("nbg-bo", d, label) for d in DATASETS for label, name in labels}
names = [name for _, name in labels if all(cells[(d, name)] is not None for d in DATASETS)]
print("| dataset | " + " | ".join(names) + " |")
print("|---|" + "---:|" * len(names))
for d in DATASETS:
    base = cells[(d, "table-random")]["test"]
    out = [f"{100 * np.mean(base):.2f}"]
    for name in names[1:]:
        v = compare(cells[(d, name)]["test"], base, name, "table-random")
        out.append(f"{100 * np.mean(cells[(d, name)]['test']):.2f} ({100 * v['diff_mean']:+.2f}, p={v['p_value']:.2g})")
    print(f"| {d} | " + " | ".join(out) + " |")

proteins = "table-latent-bo:vae_file=runs/nbg-vae-proteins-dvae-emb/vae.pt"
print()
print("| proteins (100 queries) | test diff (points, 95 % CI) | t-test p | val. diff | better / n.d. / worse | seeds |")
print("|---|---:|---:|---:|---|---:|")
for label, name in ((proteins, "BO DVAE-EMB, default"), (f"{proteins},{SETTING}", f"BO DVAE-EMB, {SETTING}")):
    for baseline, bname in (("table-random", "random search"), ("regularized-evolution", "regularized evolution")):
        row(label, baseline, name, bname, datasets=("proteins",), bench="nbg-bo-proteins")
row("regularized-evolution", "table-random", "regularized evolution", "random search", datasets=("proteins",),
    bench="nbg-bo-proteins")
