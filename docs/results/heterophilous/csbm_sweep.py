"""Table and figure of the cSBM sweep: one ``attnas compare autoattend-csbm`` folder per phi.

Reads ``<runs>/phi<PHI>-g<GRAPH_SEED>/compare.json`` (test accuracy of every row on the dense
splits its retraining seeds trained and tested on), prints a markdown table (mean +- std over
the splits, per phi; the published figures of GPR-GNN's reproduction beside ours) with the
paired verdicts of the search against the best baseline (compare's ``best_baseline``: the
highest mean VALIDATION accuracy),
GAT and random search, and draws accuracy against phi::

    python -m docs.results.heterophilous.csbm_sweep runs/csbm docs/figures/heterophilous_csbm.png
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from attnas.comparison.stats import paired_verdict

#: Published test accuracy [%] on the dense split (mean of 100 runs), as issue-quoted from the
#: student reproduction of GPR-GNN (Chien et al., ICLR 2021): phi -> model -> accuracy.
PUBLISHED = {
    -1.0: {"gat": 87.3, "gprgnn": 98.3, "cheb": 90.1, "mlp": 50.2},
    -0.5: {"gat": 76.9, "gprgnn": 92.9, "cheb": 92.0, "mlp": 75.8},
    -0.25: {"gat": 58.7, "gprgnn": 81.2, "cheb": 84.2, "mlp": 79.7},
    0.0: {"gat": 62.4, "gprgnn": 73.9, "cheb": 80.0, "mlp": 82.4},
}
#: Rows drawn, with their labels.
DRAWN = {"search": "search", "random": "random search", "mlp": "MLP", "gcn": "GCN", "gat": "GAT",
         "gprgnn": "GPR-GNN"}


def load(runs: Path, graph_seed: int = 0) -> dict[float, dict]:
    """Every finished comparison of ``graph_seed``, keyed by phi (from the folder name)."""
    out = {}
    for f in runs.glob(f"phi*-g{graph_seed}/compare.json"):
        out[float(f.parent.name[3:].rsplit("-g", 1)[0])] = json.loads(f.read_text())
    return dict(sorted(out.items()))


def scores(result: dict, name: str, split: str = "test") -> list[float]:
    """A row's per-seed scores in percent."""
    row = next(r for r in result["rows"] if r["name"] == name)
    return [100 * s for s in row[f"{split}_per_seed"]]


def verdict(result: dict, a: str, b: str) -> str:
    """``+d (p = ...)`` of the paired t-test over the splits."""
    v = paired_verdict(scores(result, a), scores(result, b), a, b)
    return f"{v['diff_mean']:+.1f} (p = {v['p_value']:.2g})"


def table(results: dict[float, dict]) -> str:
    """The markdown table: rows x phi, then the verdicts."""
    phis = list(results)
    head = "| model | " + " | ".join(f"φ = {p:g}" for p in phis) + " |"
    lines = [head, "|---|" + "---|" * len(phis)]
    for name, label in DRAWN.items():
        cells = []
        for p in phis:
            s = scores(results[p], name)
            pub = PUBLISHED.get(p, {}).get(name)
            cells.append(f"{statistics.fmean(s):.1f} ± {statistics.stdev(s):.1f}" + (f" ({pub})" if pub else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    best = {p: r["best_baseline"] for p, r in results.items()}
    lines.append("| best baseline by validation | " + " | ".join(DRAWN.get(b, b) for b in best.values()) + " |")
    for other, label in (("best", "search − best baseline"), ("gat", "search − GAT"), ("random", "search − random search")):
        cells = [verdict(r, "search", best[p] if other == "best" else other) for p, r in results.items()]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| found architecture | " + " | ".join(f"`{next(r for r in res['rows'] if r['name'] == 'search')['arch']}`"
                                                    for res in results.values()) + " |")
    return "\n".join(lines)


def figure(results: dict[float, dict], path: Path) -> None:
    """Test accuracy against phi: our rows as lines (mean +- std over splits), published figures as crosses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phis = list(results)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, label in DRAWN.items():
        means = [statistics.fmean(scores(results[p], name)) for p in phis]
        stds = [statistics.stdev(scores(results[p], name)) for p in phis]
        line, = ax.plot(phis, means, marker="o", label=label, lw=2.2 if name == "search" else 1.2)
        ax.fill_between(phis, [m - s for m, s in zip(means, stds)], [m + s for m, s in zip(means, stds)],
                        color=line.get_color(), alpha=0.12)
        pub = [(p, PUBLISHED[p][name]) for p in PUBLISHED if name in PUBLISHED[p]]
        if pub:
            ax.scatter(*zip(*pub), marker="x", color=line.get_color(), s=40)
    best = [statistics.fmean(scores(results[p], results[p]["best_baseline"])) for p in phis]
    ax.plot(phis, best, ls="--", color="black", lw=1, label="best baseline by validation")
    ax.set_xlabel("φ (−1 heterophilous … 1 homophilous)")
    ax.set_ylabel("test accuracy [%]")
    ax.set_title("cSBM (n = 5000, p = 2000, d = 5, ε = 3.25); × published")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str]) -> None:
    runs, png = Path(argv[0]), Path(argv[1])
    results = load(runs)
    if not results:
        sys.exit(f"no finished comparison under {runs}/phi*-g0/")
    print(table(results))
    figure(results, png)
    print(f"\nwrote {png}")


if __name__ == "__main__":
    main(sys.argv[1:])
