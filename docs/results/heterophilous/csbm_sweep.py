"""Table and figure of the cSBM sweep: one ``attnas compare autoattend-csbm`` folder per phi and graph.

Reads ``<runs>/phi<PHI>-g<GRAPH_SEED>/compare.json`` (test accuracy of every row on the dense
splits its retraining seeds trained and tested on). With ``--pooled`` (several graph seeds) it
prints one row per phi: every model's mean +- std over all graphs x splits, and the search's
paired differences to the best baseline (compare's ``best_baseline`` of each graph: the highest
mean VALIDATION accuracy there), GAT and random search over the graph x split pairs, with the
per-graph differences beside them (each graph has its own search, so the graphs, not the
splits, are the independent repeats of the search). Without it, the table of graph seed 0
(models x phi; ``--graph G`` for another). Both draw accuracy against phi (pooled: mean over
graphs x splits)::

    python -m docs.results.heterophilous.csbm_sweep runs/csbm docs/figures/heterophilous_csbm.png [--pooled | --graph G]
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


def load_graphs(runs: Path) -> dict[int, dict[float, dict]]:
    """Every graph seed's finished comparisons: graph seed -> phi -> ``compare.json`` (folders
    ``phi<PHI>-g<GRAPH_SEED>`` only; ``...-g1-s3`` and the like are other protocols)."""
    out: dict[int, dict[float, dict]] = {}
    for f in runs.glob("phi*-g*/compare.json"):
        phi, _, graph = f.parent.name[3:].rpartition("-g")
        if graph.isdigit():
            out.setdefault(int(graph), {})[float(phi)] = json.loads(f.read_text())
    return {g: dict(sorted(by_phi.items())) for g, by_phi in sorted(out.items())}


def scores(result: dict, name: str, split: str = "test") -> list[float]:
    """A row's per-seed scores in percent; ``best`` is the graph's best baseline by validation."""
    name = result["best_baseline"] if name == "best" else name
    row = next(r for r in result["rows"] if r["name"] == name)
    return [100 * s for s in row[f"{split}_per_seed"]]


def pooled_scores(per_graph: list[dict], name: str) -> list[float]:
    """A row's scores over every graph's splits, graph after graph (the pairing order)."""
    return [s for result in per_graph for s in scores(result, name)]


def pooled_table(graphs: dict[int, dict[float, dict]]) -> str:
    """One row per phi: models' mean +- std over graphs x splits and the search's paired differences."""
    phis = sorted({p for by_phi in graphs.values() for p in by_phi})
    head = ("| φ | graphs | " + " | ".join(DRAWN.values()) + " | best baseline by validation | "
            "search − best baseline | search − GAT | search − random search |")
    lines = [head, "|---|---|" + "---|" * (len(DRAWN) + 4)]
    for p in phis:
        per_graph = [graphs[g][p] for g in graphs if p in graphs[g]]
        cells = [cell(pooled_scores(per_graph, name), p, name) for name in DRAWN]
        best = ", ".join(DRAWN.get(r["best_baseline"], r["best_baseline"]) for r in per_graph)
        diffs = []
        for other in ("best", "gat", "random"):
            each = "; ".join(f"{statistics.fmean(scores(r, 'search')) - statistics.fmean(scores(r, other)):+.1f}"
                             for r in per_graph)
            diffs.append(difference(pooled_scores(per_graph, "search"), pooled_scores(per_graph, other), f"; {each}"))
        graph_ids = ", ".join(str(g) for g in graphs if p in graphs[g])
        lines.append(f"| {p:g} | {graph_ids} | " + " | ".join(cells) + f" | {best} | " + " | ".join(diffs) + " |")
    return "\n".join(lines)


def architectures(graphs: dict[int, dict[float, dict]]) -> str:
    """The found architecture per phi and graph, as a markdown list."""
    lines = []
    for p in sorted({p for by_phi in graphs.values() for p in by_phi}):
        found = [f"graph {g}: `{next(r for r in graphs[g][p]['rows'] if r['name'] == 'search')['arch']}`"
                 for g in graphs if p in graphs[g]]
        lines.append(f"- φ = {p:g}: " + "; ".join(found))
    return "\n".join(lines)


def cell(s: list[float], phi: float, name: str) -> str:
    """``mean ± std`` of scores ``s``, with the published figure of ``name`` at ``phi`` in brackets."""
    pub = PUBLISHED.get(phi, {}).get(name)
    return f"{statistics.fmean(s):.1f} ± {statistics.stdev(s):.1f}" + (f" ({pub})" if pub else "")


def difference(a: list[float], b: list[float], detail: str = "") -> str:
    """``+d (p = ...)`` of the paired t-test of ``a`` against ``b``, ``detail`` before the bracket closes."""
    v = paired_verdict(a, b, "a", "b")
    return f"{v['diff_mean']:+.1f} (p = {v['p_value']:.2g}{detail})"


def verdict(result: dict, a: str, b: str) -> str:
    """``+d (p = ...)`` of the paired t-test over the splits."""
    return difference(scores(result, a), scores(result, b))


def table(results: dict[float, dict]) -> str:
    """The markdown table: rows x phi, then the verdicts."""
    phis = list(results)
    head = "| model | " + " | ".join(f"φ = {p:g}" for p in phis) + " |"
    lines = [head, "|---|" + "---|" * len(phis)]
    for name, label in DRAWN.items():
        cells = [cell(scores(results[p], name), p, name) for p in phis]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    best = [r["best_baseline"] for r in results.values()]
    lines.append("| best baseline by validation | " + " | ".join(DRAWN.get(b, b) for b in best) + " |")
    for other, label in (("best", "search − best baseline"), ("gat", "search − GAT"), ("random", "search − random search")):
        cells = [verdict(r, "search", other) for r in results.values()]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| found architecture | " + " | ".join(f"`{next(r for r in res['rows'] if r['name'] == 'search')['arch']}`"
                                                    for res in results.values()) + " |")
    return "\n".join(lines)


def figure(results: dict[float, list[dict]], path: Path) -> None:
    """Test accuracy against phi: our rows as lines (mean +- std over graphs x splits), published as crosses.

    Args:
        results: phi -> the compare results of every graph measured at that phi.
        path: Where the PNG goes.
    """
    draw(list(results), lambda p, name: statistics.fmean(pooled_scores(results[p], name)), path,
         std_of=lambda p, name: statistics.stdev(pooled_scores(results[p], name)))


def draw(phis: list[float], mean_of, path: Path, std_of=None, ylabel: str = "test accuracy [%]",
         title: str = "cSBM (n = 5000, p = 2000, d = 5, ε = 3.25); × published", legend: dict | None = None) -> None:
    """Accuracy against phi: every drawn row and the best baseline by validation, published as crosses.

    Args:
        phis: The x values.
        mean_of: ``(phi, row) -> %``; row ``best`` is the best baseline by validation.
        path: Where the PNG goes.
        std_of: ``(phi, row) -> %`` shaded around each line, or None.
        ylabel: The y axis label.
        title: The figure title.
        legend: Keyword arguments of the legend (default: two columns where matplotlib finds room).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, label in DRAWN.items():
        means = [mean_of(p, name) for p in phis]
        line, = ax.plot(phis, means, marker="o", label=label, lw=2.2 if name == "search" else 1.2)
        if std_of is not None:
            stds = [std_of(p, name) for p in phis]
            ax.fill_between(phis, [m - s for m, s in zip(means, stds)], [m + s for m, s in zip(means, stds)],
                            color=line.get_color(), alpha=0.12)
        pub = [(p, PUBLISHED[p][name]) for p in PUBLISHED if name in PUBLISHED[p]]
        if pub:
            ax.scatter(*zip(*pub), marker="x", color=line.get_color(), s=40)
    ax.plot(phis, [mean_of(p, "best") for p in phis], ls="--", color="black", lw=1, label="best baseline by validation")
    ax.set_xlabel("φ (−1 heterophilous … 1 homophilous)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(**(legend or {"fontsize": 8, "ncol": 2}))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="folder of phi<PHI>-g<GRAPH_SEED>/compare.json")
    parser.add_argument("png", type=Path, help="where the figure goes")
    parser.add_argument("--pooled", action="store_true", help="pool every graph seed found")
    parser.add_argument("--graph", type=int, default=0, help="the graph seed tabled without --pooled (default 0)")
    args = parser.parse_args(argv)
    graphs = load_graphs(args.runs)
    graphs = graphs if args.pooled else {args.graph: graphs.get(args.graph, {})}
    if not any(graphs.values()):
        sys.exit(f"no finished comparison under {args.runs}/phi*-g*/" + ("" if args.pooled else f" for graph seed {args.graph}"))
    if args.pooled:
        print(pooled_table(graphs))
        print()
        print(architectures(graphs))
    else:
        print(table(graphs[args.graph]))
    phis = sorted({p for by_phi in graphs.values() for p in by_phi})
    figure({p: [graphs[g][p] for g in graphs if p in graphs[g]] for p in phis}, args.png)
    print(f"\nwrote {args.png}")


if __name__ == "__main__":
    main(sys.argv[1:])
