"""The AutoAttend graph tables of docs/results.md, read from finished run folders.

Table 5 rows come from ``attnas retrain`` summaries (``retrain/<dataset>/<init>/summary.json``)
of search runs, one run per search seed; Table 7 from ``docs/results/autoattend_graph/context_ablation.py``
folders (one per supernet seed); the ranking table from ``docs/results/autoattend_graph/supernet_ranking.py``
results. Nothing is trained here.

Usage::

    python -m docs.results.autoattend_graph.tables table5 --row "AutoAttend=runs/t5/aa-cora-s*" \\
        --row "random search=runs/t5/rnd-cora-s*" --row "GAT=runs/base-gat-cora"
    python -m docs.results.autoattend_graph.tables paired --row "recipe=runs/t5/citeseer-s[01]/search" \
        --row "averaged=runs/swa-cs-s[01]"
    python -m docs.results.autoattend_graph.tables table6 cora=runs/t5/cora,runs/t6/cora-add --seeds 5
    python -m docs.results.autoattend_graph.tables table7 runs/t7/cora-s0 runs/t7/cora-s1
    python -m docs.results.autoattend_graph.tables ranking runs/rank-cora-final/ranking-*.json
    python -m docs.results.autoattend_graph.tables figure runs/rank-cora-final/ranking-fc.json \
        runs/rank-cora-final/ranking-fc-warm.json --out docs/figures/autoattend_ranking_cora.png
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
from pathlib import Path

from attnas.runs.run_dir import RunDir


def _fmt(values: list[float], digits: int = 1) -> str:
    m = 100 * statistics.fmean(values)
    s = 100 * statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def table5(rows: list[str], metric: str) -> str:
    """One line per ``label=glob``: per run (search seed) and pooled over runs, per init."""
    out = ["| model | init | per search seed: test mean ± std (10 seeds) | all seeds pooled | architecture (seed 0 first) |",
           "|---|---|---|---|---|"]
    for row in rows:
        label, _, pattern = row.partition("=")
        runs = sorted(Path(p) for p in glob.glob(pattern))
        for init in ("supernet", "scratch"):
            per_run, pooled, archs = [], [], []
            for run in runs:
                for summary in sorted(run.glob(f"retrain/*/{init}/summary.json")):
                    seeds = [json.loads(p.read_text())[f"test_{metric}"] for p in summary.parent.glob("seed-*.json")]
                    per_run.append(_fmt(seeds))
                    pooled += seeds
                    arch = json.loads((run / "metrics.json").read_text()).get("arch", "")
                    archs.append(arch if not arch.startswith("{") else json.dumps(json.loads(arch)["choices"]))
            if pooled:
                out.append(f"| {label} | {init} | {'; '.join(per_run)} | {_fmt(pooled)} (n={len(pooled)}) | "
                           f"{'; '.join(f'`{a}`' for a in archs[:1])} |")
    return "\n".join(out)


def _seed_scores(run: Path, init: str, metric: str) -> dict[int, float]:
    """Test score per retraining seed of ``run``'s ``attnas retrain`` with ``init``."""
    return {int(p.stem.split("-")[1]): json.loads(p.read_text())[f"test_{metric}"]
            for p in sorted(run.glob(f"retrain/*/{init}/seed-*.json"))}


def paired(rows: list[str], metric: str, init: str = "supernet") -> str:
    """The first row's runs against each other row's, matched by search seed (the runs' sorted
    order) and retraining seed: mean difference and paired t-test, per search seed, pooled, and over
    the search seeds' means (the search seed as the unit)."""
    from scipy.stats import ttest_rel

    labelled = []
    for label, _, pattern in (row.partition("=") for row in rows):
        label, _, row_init = label.partition(":")  # LABEL:scratch=GLOB: that row's retraining init
        labelled.append((label, sorted(Path(p) for p in glob.glob(pattern)), row_init or init))
    (base_label, base_runs, base_init), others = labelled[0], labelled[1:]
    out = [f"| row (init) | search seed | {base_label} ({base_init}) | other | difference | paired t-test p |",
           "|---|---|---|---|---|---|"]
    for label, runs, row_init in others:
        name = f"{label} ({row_init})"
        if len(runs) != len(base_runs):
            raise SystemExit(f"{label}: {len(runs)} runs against {base_label}'s {len(base_runs)}")
        pooled_a, pooled_b, means_a, means_b = [], [], [], []
        for k, (ra, rb) in enumerate(zip(base_runs, runs)):
            a, b = _seed_scores(ra, base_init, metric), _seed_scores(rb, row_init, metric)
            seeds = sorted(a.keys() & b.keys())
            if len(seeds) < 2:
                raise SystemExit(f"{ra} and {rb}: fewer than two common retraining seeds")
            xa, xb = [a[i] for i in seeds], [b[i] for i in seeds]
            pooled_a += xa
            pooled_b += xb
            means_a.append(statistics.fmean(xa))
            means_b.append(statistics.fmean(xb))
            out.append(f"| {name} | {k} ({rb.name}) | {_fmt(xa)} | {_fmt(xb)} | "
                       f"{100 * (statistics.fmean(xb) - statistics.fmean(xa)):+.2f} | {ttest_rel(xb, xa).pvalue:.2g} |")
        out.append(f"| {name} | all (n={len(pooled_a)}) | {_fmt(pooled_a)} | {_fmt(pooled_b)} | "
                   f"{100 * (statistics.fmean(pooled_b) - statistics.fmean(pooled_a)):+.2f} | "
                   f"{ttest_rel(pooled_b, pooled_a).pvalue:.2g} |")
        if len(means_a) > 1:  # the search seeds as the unit: their means paired
            out.append(f"| {name} | search seeds' means (n={len(means_a)}) | {_fmt(means_a)} | {_fmt(means_b)} | "
                       f"{100 * (statistics.fmean(means_b) - statistics.fmean(means_a)):+.2f} | "
                       f"{ttest_rel(means_b, means_a).pvalue:.2g} |")
    return "\n".join(out)


#: Table 6 of the paper: validation accuracy [%] of the best model found in each space.
PAPER_TABLE6 = {"cora": (81.80, 82.96), "citeseer": (72.18, 72.90)}


def _search_row_means(folder: Path, seeds: list[int]) -> dict[str, list[float]]:
    """The ``search`` row's validation and test means of each search seed of an ``attnas compare`` folder."""
    out: dict[str, list[float]] = {"val": [], "test": []}
    for seed in seeds:
        result = json.loads((folder / f"search-seed-{seed}" / "compare.json").read_text())
        row = next(r for r in result["rows"] if r["name"] == "search")
        out["val"].append(row["val"]["mean"])
        out["test"].append(row["test"]["mean"])
    return out


def table6(datasets: list[str], seeds: int) -> str:
    """Table 6 (attention-layer ablation) from pairs of ``attnas compare`` folders.

    Each ``DATASET=FULL,BASELINE`` names the compare folder of the full space (the recipe) and of
    the baseline space (``space.layer_types=[add]``); search seeds ``0 .. seeds-1`` of both are
    paired. Validation accuracy is the paper's measure; test accuracy is reported beside it.
    """
    from scipy.stats import ttest_rel

    out = ["| dataset | space | validation [%] (paper) | test [%] | per search seed: validation / test |",
           "|---|---|---|---|---|"]
    verdicts = []
    for item in datasets:
        dataset, _, folders = item.partition("=")
        full_folder, _, baseline_folder = folders.partition(",")
        full = _search_row_means(Path(full_folder), list(range(seeds)))
        base = _search_row_means(Path(baseline_folder), list(range(seeds)))
        paper = PAPER_TABLE6.get(dataset.lower(), (float("nan"), float("nan")))
        for label, scores, published in (("baseline (addition layers only)", base, paper[0]),
                                         ("full (with attention layers)", full, paper[1])):
            per_seed = "; ".join(f"{100 * v:.2f} / {100 * t:.2f}" for v, t in zip(scores["val"], scores["test"]))
            out.append(f"| {dataset} | {label} | {_fmt(scores['val'], 2)} ({published:.2f}) | {_fmt(scores['test'], 2)} | "
                       f"{per_seed} |")
        for measure in ("val", "test"):
            diff = [a - b for a, b in zip(full[measure], base[measure])]
            verdicts.append(f"- {dataset}, {'validation' if measure == 'val' else 'test'}: full - baseline "
                            f"{100 * statistics.fmean(diff):+.2f} points, paired over {seeds} search seeds, "
                            f"p = {ttest_rel(full[measure], base[measure]).pvalue:.2g}")
    return "\n".join(out + [""] + verdicts)


def table7(folders: list[str], label: str = "") -> str:
    """Mean validation accuracy of the 100 prior samples per context, over supernet seeds
    (the contexts each folder holds; ``label`` is appended to the context's name)."""
    out = ["| context | " + " | ".join(f"supernet `{Path(f).name}`" for f in folders) + " | mean |",
           "|---|" + "---|" * (len(folders) + 1)]
    for ctx in ("nc", "sc", "tc", "fc"):
        if not all((Path(folder) / ctx / "events.jsonl").exists() for folder in folders):
            continue
        means = []
        for folder in folders:
            scores = [e["accuracy"] for e in RunDir(Path(folder) / ctx).events("evolution")]
            means.append(statistics.fmean(scores))
        out.append(f"| {ctx.upper()}{label} | " + " | ".join(f"{100 * m:.2f}" for m in means) +
                   f" | {100 * statistics.fmean(means):.2f} |")
    return "\n".join(out)


def ranking(files: list[str]) -> str:
    """Kendall's tau and Spearman's rho of each ranking result."""
    out = ["| supernet | tau (val) | rho (val) | tau (test) | rho (test) | supernet's top-1: stand-alone val rank, test |",
           "|---|---|---|---|---|---|"]
    for f in sorted(files):
        s = json.loads(Path(f).read_text())
        v, t, top = s["val"], s["test"], s["supernet_top1"]
        out.append(f"| {s['recipe']} {s['label']} | {v['kendall_tau']:.2f} | {v['spearman_rho']:.2f} | "
                   f"{t['kendall_tau']:.2f} | {t['spearman_rho']:.2f} | {top['val_rank']} of {s['archs']}, "
                   f"{100 * top['test_mean']:.1f} |")
    return "\n".join(out)


def figure(files: list[str], out: str) -> None:
    """One scatter panel per ranking result: supernet score against stand-alone validation accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [json.loads(Path(f).read_text()) for f in files]
    fig, axes = plt.subplots(1, len(results), figsize=(3.6 * len(results), 3.3), squeeze=False, sharey=True)
    for ax, s in zip(axes[0], results):
        rows = s["rows"]
        ax.errorbar([100 * r["supernet"] for r in rows], [100 * r["val_mean"] for r in rows],
                    yerr=[100 * r["val_std"] for r in rows], fmt="o", ms=3, alpha=0.8, capsize=2)
        ax.set_title(f"{s['recipe']} [{s['label']}]\ntau {s['val']['kendall_tau']:.2f}, "
                     f"rho {s['val']['spearman_rho']:.2f}", fontsize=8)
        ax.set_xlabel("supernet val. accuracy [%]", fontsize=8)
    axes[0][0].set_ylabel(f"stand-alone val. accuracy [%]\n(mean of {results[0]['seeds']} seeds)", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="table", required=True)
    t5 = sub.add_parser("table5")
    t5.add_argument("--row", action="append", required=True, help="LABEL=GLOB of run folders")
    t5.add_argument("--metric", default="accuracy")
    pr = sub.add_parser("paired")
    pr.add_argument("--row", action="append", required=True,
                    help="LABEL=GLOB of run folders (LABEL:INIT=GLOB: that row's init); the first is the base")
    pr.add_argument("--metric", default="accuracy")
    pr.add_argument("--init", default="supernet", choices=["supernet", "scratch"])
    t6 = sub.add_parser("table6")
    t6.add_argument("datasets", nargs="+", help="DATASET=FULL_COMPARE_FOLDER,BASELINE_COMPARE_FOLDER")
    t6.add_argument("--seeds", type=int, default=5, help="search seeds 0 .. N-1 of both folders are paired")
    t7 = sub.add_parser("table7")
    t7.add_argument("folders", nargs="+")
    t7.add_argument("--label", default="", help="appended to each context's name (e.g. ' + warm-up')")
    rk = sub.add_parser("ranking")
    rk.add_argument("files", nargs="+")
    fg = sub.add_parser("figure")
    fg.add_argument("files", nargs="+")
    fg.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.table == "table5":
        print(table5(args.row, args.metric))
    elif args.table == "paired":
        print(paired(args.row, args.metric, args.init))
    elif args.table == "table6":
        print(table6(args.datasets, args.seeds))
    elif args.table == "table7":
        print(table7(args.folders, args.label))
    elif args.table == "ranking":
        print(ranking(args.files))
    else:
        figure(args.files, args.out)


if __name__ == "__main__":
    main()
