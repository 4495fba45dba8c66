"""Draw the figures and print the tables of docs/results/dartformer.md.

Reads the run directories written by the commands listed in docs/results/dartformer.md
(default folder ``runs/``)::

    PYTHONPATH=. python -m docs.results.dartformer.figure [RUNS_DIR]              # ListOps
    PYTHONPATH=. python -m docs.results.dartformer.figure RUNS_DIR sst2-bytes     # SST-2 bytes

ListOps (``docs/figures/dartformer_listops_quick.png``): 3 retrain seeds per model, the
run's own seed listed apart. SST-2 bytes (``docs/figures/dartformer_sst2_bytes_quick.png``):
every seed there is (the run's own seed 0 plus its retrain seeds), and runs that have not
finished are reported as missing.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MECHANISMS = ("softmax", "linear", "performer", "linformer", "reformer", "local", "longformer", "bigbird", "sparse",
              "synthesizer-dense", "synthesizer-random")


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def summary(run: Path) -> dict:
    return load(next((run / "retrain").glob("*/summary.json")))


def ranks(values: list[float]) -> list[float]:
    """Average ranks (1 = smallest), ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = ranks(a), ranks(b)
    return statistics.correlation(ra, rb)


def main(runs: Path) -> None:
    homog = load(runs / "dartformer-listops-quick" / "metrics.json")
    rows = []
    for m in MECHANISMS:
        s = summary(runs / f"mechanism-listops-quick-{m}")
        own = load(runs / f"mechanism-listops-quick-{m}" / "metrics.json")
        rows.append({"mechanism": m, "drop": homog[f"drop_score_{m}"], "test": s["test_accuracy_mean"],
                     "test_std": s["test_accuracy_std"], "val": s["val_accuracy_mean"], "val_std": s["val_accuracy_std"],
                     "per_seed": [r["test_accuracy"] for r in s["per_seed"]], "params": own["params"],
                     "run_test": own["test_accuracy"]})
        four = [own["test_accuracy"], *rows[-1]["per_seed"]]
        rows[-1]["test4"], rows[-1]["test4_std"] = statistics.fmean(four), statistics.stdev(four)
    by_test = sorted(rows, key=lambda r: -r["test"])
    rank_of = {r["mechanism"]: i + 1 for i, r in enumerate(by_test)}
    by_drop = sorted(rows, key=lambda r: -r["drop"])
    drop_rank = {r["mechanism"]: i + 1 for i, r in enumerate(by_drop)}
    rank4 = {r["mechanism"]: i + 1 for i, r in enumerate(sorted(rows, key=lambda r: -r["test4"]))}
    print("| mechanism | test accuracy, 3 retrain seeds | val accuracy, 3 seeds | per seed | 4 seeds (+ the run's own) "
          "| params | drop score | rank: test 3 seeds / 4 seeds | rank: drop score |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| `{r['mechanism']}` | {r['test']:.3f} ± {r['test_std']:.3f} | {r['val']:.3f} ± {r['val_std']:.3f} | "
              f"{', '.join(f'{x:.3f}' for x in r['per_seed'])} | {r['test4']:.3f} ± {r['test4_std']:.3f} | "
              f"{r['params']:,} | {r['drop']:+.3f} | {rank_of[r['mechanism']]} / {rank4[r['mechanism']]} | "
              f"{drop_rank[r['mechanism']]} |")
    rho = spearman([r["drop"] for r in rows], [r["test"] for r in rows])
    rho_val = spearman([r["drop"] for r in rows], [r["val"] for r in rows])
    rho4 = spearman([r["drop"] for r in rows], [r["test4"] for r in rows])
    print(f"\nSpearman(drop score, homogeneous test accuracy) = {rho:.3f} (3 seeds), {rho4:.3f} (4 seeds); "
          f"with val accuracy = {rho_val:.3f}")
    print(f"search picked: {json.dumps(load(runs / 'dartformer-listops-quick' / 'arch.json')['choices'])}; "
          f"best homogeneous by test: {by_test[0]['mechanism']}")
    print("\n| model | architecture | test accuracy (3 seeds) | val accuracy | the search's own run (seed 0): test | params |")
    print("| --- | --- | --- | --- | --- | --- |")
    best = by_test[0]
    for label, name in (("NAS One-shot", "dartformer-listops-one-shot-quick"), ("NAS Prune", "dartformer-listops-prune-quick"),
                        ("homogeneous search", "dartformer-listops-quick")):
        m = load(runs / name / "metrics.json")
        s = summary(runs / name)
        print(f"| {label} | {m['arch']} | {s['test_accuracy_mean']:.3f} ± {s['test_accuracy_std']:.3f} | "
              f"{s['val_accuracy_mean']:.3f} ± {s['val_accuracy_std']:.3f} | {m['test_accuracy']:.3f} | {m['params']:,} |")
    print(f"| best homogeneous | {best['mechanism']} | {best['test']:.3f} ± {best['test_std']:.3f} | "
          f"{best['val']:.3f} ± {best['val_std']:.3f} | | {best['params']:,} |")

    prune = load(runs / "dartformer-listops-prune-quick" / "metrics.json")["selection"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    ax = axes[0]
    x = [r["drop"] for r in rows]
    y = [r["test"] for r in rows]
    ax.errorbar(x, y, yerr=[r["test_std"] for r in rows], fmt="o", ms=4, capsize=2)
    for r in rows:
        ax.annotate(r["mechanism"], (r["drop"], r["test"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("masked-drop score in the homogeneous supernet")
    ax.set_ylabel("homogeneous test accuracy (3 seeds)")
    ax.set_title(f"ListOps 10-60 tokens: Spearman rho = {rho:.2f}")
    ax = axes[1]
    base = [t["base_accuracy"] for t in prune["trials"]]
    ax.plot(range(len(base)), base, marker=".")
    ax.set_xlabel("NAS Prune round (heads dropped)")
    ax.set_ylabel("supernet validation accuracy before the drop")
    ax.set_title(f"NAS Prune: 44 single heads to 4 ({', '.join(prune['kept'])})", fontsize=8)
    fig.tight_layout()
    out = Path("docs/figures/dartformer_listops_quick.png")
    fig.savefig(out, dpi=120)
    print(f"\nwrote {out}")


def seeds_of(run: Path) -> dict | None:
    """The run's own result plus every retrain seed: test/val lists, params, arch; None if unfinished."""
    if not (run / "metrics.json").exists():
        return None
    own = load(run / "metrics.json")
    if "test_accuracy" not in own:
        return None
    tests, vals = [own["test_accuracy"]], [own["val_accuracy"]]
    for f in sorted((run / "retrain").glob("**/seed-*.json")):  # finished retrain seeds, also of a partial retrain
        r = load(f)
        tests.append(r["test_accuracy"])
        vals.append(r["val_accuracy"])
    return {"tests": tests, "vals": vals, "params": own.get("params"), "arch": own.get("arch"), "metrics": own}


def mean_std(xs: list[float]) -> str:
    if len(xs) == 1:
        return f"{xs[0]:.3f} (1 seed)"
    return f"{statistics.fmean(xs):.3f} ± {statistics.stdev(xs):.3f} ({len(xs)} seeds)"


def main_generic(runs: Path, data: str) -> None:
    """Tables and figure for a dataset run with the ``*-<data>-quick`` recipes (own seed + retrains)."""
    prefix = f"{data}-quick"
    search = runs / f"dartformer-{prefix}"
    homog = load(search / "metrics.json") if (search / "metrics.json").exists() else None
    rows, missing = [], []
    for m in MECHANISMS:
        r = seeds_of(runs / f"mechanism-{prefix}-{m}")
        if r is None:
            missing.append(m)
            continue
        drop = homog.get(f"drop_score_{m}") if homog else None
        rows.append({"mechanism": m, "drop": drop, "test": statistics.fmean(r["tests"]), **r})
    by_test = sorted(rows, key=lambda r: -r["test"])
    rank_of = {r["mechanism"]: i + 1 for i, r in enumerate(by_test)}
    scored = [r for r in rows if r["drop"] is not None]
    drop_rank = {r["mechanism"]: i + 1 for i, r in enumerate(sorted(scored, key=lambda r: -r["drop"]))}
    print("| mechanism | test accuracy | val accuracy | test, per seed | params | drop score | rank: test | rank: drop |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        drop = f"{r['drop']:+.3f}" if r["drop"] is not None else "n/a"
        print(f"| `{r['mechanism']}` | {mean_std(r['tests'])} | {mean_std(r['vals'])} | "
              f"{', '.join(f'{x:.3f}' for x in r['tests'])} | {r['params']:,} | {drop} | {rank_of[r['mechanism']]} | "
              f"{drop_rank.get(r['mechanism'], 'n/a')} |")
    if missing:
        print(f"\nnot finished: {', '.join(missing)}")
    rho = None
    if len(scored) >= 3:
        rho = spearman([r["drop"] for r in scored], [r["test"] for r in scored])
        rho_val = spearman([r["drop"] for r in scored], [statistics.fmean(r["vals"]) for r in scored])
        print(f"\nSpearman(drop score, homogeneous test accuracy) = {rho:.3f} over {len(scored)} mechanisms; "
              f"with val accuracy = {rho_val:.3f}")
    if homog:
        print(f"supernet val accuracy {homog['supernet_val_accuracy']:.3f} "
              f"(best epoch {homog.get('supernet_best_epoch')} of {homog['supernet_epochs']}); "
              f"search picked: {json.dumps(load(search / 'arch.json')['choices'])}"
              + (f"; best homogeneous by mean test: {by_test[0]['mechanism']}" if by_test else ""))
    print("\n| model | architecture | test accuracy | val accuracy | test, per seed | params |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, name in (("NAS One-shot", f"dartformer-{data}-one-shot-quick"),
                        ("NAS Prune", f"dartformer-{data}-prune-quick"), ("homogeneous search", f"dartformer-{prefix}")):
        r = seeds_of(runs / name)
        if r is None:
            print(f"| {label} | not finished | | | | |")
            continue
        chosen = load(runs / name / "arch.json")["choices"]["mechanism"]
        same = runs / f"mechanism-{prefix}-{chosen}" if isinstance(chosen, str) else None
        if len(r["tests"]) == 1 and same is not None and (same / "metrics.json").exists():
            # the search's final model is that mechanism's run (same seed, same recipe): use its seeds
            twin = seeds_of(same)
            if twin and abs(twin["tests"][0] - r["tests"][0]) < 1e-12:
                r = {**twin, "arch": f"{r['arch']} (= `mechanism-{prefix}-{chosen}`, same seeds)"}
        print(f"| {label} | {r['arch']} | {mean_std(r['tests'])} | {mean_std(r['vals'])} | "
              f"{', '.join(f'{x:.3f}' for x in r['tests'])} | {r['params']:,} |")
    if by_test:
        b = by_test[0]
        print(f"| best homogeneous | {b['mechanism']} | {mean_std(b['tests'])} | {mean_std(b['vals'])} | "
              f"{', '.join(f'{x:.3f}' for x in b['tests'])} | {b['params']:,} |")

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    ax = axes[0]
    for r in scored:
        sd = statistics.stdev(r["tests"]) if len(r["tests"]) > 1 else 0.0
        ax.errorbar([r["drop"]], [r["test"]], yerr=[sd], fmt="o", ms=4, capsize=2, color="C0")
        ax.annotate(r["mechanism"], (r["drop"], r["test"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("masked-drop score in the homogeneous supernet")
    ax.set_ylabel("homogeneous test accuracy (mean over seeds)")
    ax.set_title(f"{data}: Spearman rho = {rho:.2f}" if rho is not None else data)
    ax = axes[1]
    prune = runs / f"dartformer-{data}-prune-quick" / "metrics.json"
    one_shot = runs / f"dartformer-{data}-one-shot-quick" / "metrics.json"
    if prune.exists():
        sel = load(prune)["selection"]
        base = [t["base_accuracy"] for t in sel["trials"]]
        ax.plot(range(len(base)), base, marker=".")
        ax.set_xlabel("NAS Prune round (heads dropped)")
        ax.set_ylabel("supernet validation accuracy before the drop")
        ax.set_title(f"NAS Prune: kept {', '.join(sel['kept'])}", fontsize=8)
    elif one_shot.exists():
        sel = load(one_shot)["selection"]
        scores = sorted(sel["trials"][0]["scores"].items(), key=lambda kv: -kv[1])
        ax.bar(range(len(scores)), [v for _, v in scores],
               color=["C1" if k in sel["kept"] else "C0" for k, _ in scores])
        ax.set_xlabel("single heads, by score (orange: kept by NAS One-shot)")
        ax.set_ylabel("masked-drop score")
        ax.set_title("NAS One-shot: single-head scores (NAS Prune not run)", fontsize=8)
    fig.tight_layout()
    out = Path(f"docs/figures/dartformer_{data.replace('-', '_')}_quick.png")
    fig.savefig(out, dpi=120)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    runs_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("runs")
    dataset = sys.argv[2] if len(sys.argv) > 2 else "listops"
    if dataset == "listops":
        main(runs_dir)
    else:
        main_generic(runs_dir, dataset)
