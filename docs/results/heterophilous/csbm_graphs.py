"""The cSBM sweep over graph seeds: one search per graph, so the graphs are the repeats of the search.

Combines the printed figures of graph seeds 0 and 1 (``records/csbm/graphs-0-1.json``: their
``compare.json`` files were not kept) with every ``phi<PHI>-g<GRAPH_SEED>/compare.json`` record
(graph seed 2, graph seed 1 at phi = 1). Per phi it prints each model's mean over graphs (of each
graph's mean over its splits) and the search's difference to random search, to the best
baseline by validation and to GAT on each graph, with a one-sample t-test of those differences
over the graphs (:func:`csbm_sweep.difference` against zero). The figure draws
the mean accuracy over graphs against phi::

    python -m docs.results.heterophilous.csbm_graphs docs/results/heterophilous/records/csbm docs/figures/heterophilous_csbm_graphs.png
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from docs.results.heterophilous import csbm_sweep
from docs.results.heterophilous.csbm_sweep import DRAWN, PUBLISHED, draw, load_graphs, scores

#: The search's differences tabled, with their column labels.
DIFFERENCES = {"random": "search − random search", "best": "search − best baseline by validation",
               "gat": "search − GAT"}


def per_graph(records: Path, printed: Path) -> dict[float, dict[int, dict]]:
    """phi -> graph seed -> ``{"mean": {row: %}, "diff": {other: %}, "best": row}``.

    Printed graphs give their models' mean over the printed graphs (the same for each of them) and
    their own differences; recorded graphs give both from their ``compare.json``.
    """
    out: dict[float, dict[int, dict]] = {}
    for phi, entry in json.loads(printed.read_text())["phi"].items():
        for i, g in enumerate(entry["graphs"]):
            out.setdefault(float(phi), {})[g] = {
                "mean": entry["mean"], "best": entry["best"],
                "diff": {k: v[i] for k, v in entry["diff"].items()}}
    for g, by_phi in load_graphs(records).items():
        for phi, result in by_phi.items():
            if g in out.get(phi, {}):
                raise ValueError(f"graph seed {g} at phi = {phi:g} is both printed and recorded")
            best = result["best_baseline"]
            mean = {name: statistics.fmean(scores(result, name)) for name in (*DRAWN, best)}
            out.setdefault(phi, {})[g] = {
                "mean": mean, "best": best,
                "diff": {other: mean["search"] - mean[best if other == "best" else other] for other in DIFFERENCES}}
    return dict(sorted(out.items()))


def mean_over_graphs(graphs: dict[int, dict], name: str) -> float:
    """A row's mean over graphs; ``best`` is each graph's best baseline by validation."""
    return statistics.fmean(g["mean"][g["best"] if name == "best" else name] for g in graphs.values())


def difference(graphs: dict[int, dict], other: str) -> str:
    """Per-graph differences, then their mean and the one-sample t-test's p over the graphs."""
    each = [round(g["diff"][other], 1) for g in graphs.values()]
    shown = " / ".join(f"{d:+.1f}" for d in each)
    return shown if len(each) < 2 else f"{shown}: {csbm_sweep.difference(each, [0.0] * len(each))}"


def table(sweep: dict[float, dict[int, dict]]) -> str:
    """Markdown: one row per phi, model means over graphs, then the search's differences."""
    head = "| φ | graphs | " + " | ".join(DRAWN.values()) + " | " + " | ".join(DIFFERENCES.values()) + " |"
    lines = [head, "|---|---|" + "---|" * (len(DRAWN) + len(DIFFERENCES))]
    for phi, graphs in sweep.items():
        means = []
        for name in DRAWN:
            pub = PUBLISHED.get(phi, {}).get(name)
            means.append(f"{mean_over_graphs(graphs, name):.1f}" + (f" ({pub})" if pub else ""))
        diffs = [difference(graphs, other) for other in DIFFERENCES]
        ids = ", ".join(str(g) for g in graphs)
        lines.append(f"| {phi:g} | {ids} | " + " | ".join(means) + " | " + " | ".join(diffs) + " |")
    return "\n".join(lines)


def figure(sweep: dict[float, dict[int, dict]], path: Path) -> None:
    """Mean test accuracy over graphs against phi, published figures as crosses."""
    draw(list(sweep), lambda p, name: mean_over_graphs(sweep[p], name), path,
         ylabel="test accuracy [%], mean over graphs", title="cSBM, three graph seeds, one search each; × published",
         legend={"fontsize": 8, "ncol": 3, "loc": "lower center"})


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, help="folder of phi<PHI>-g<GRAPH_SEED>/compare.json and graphs-0-1.json")
    parser.add_argument("png", type=Path, help="where the figure goes")
    parser.add_argument("--printed", type=Path, default=None,
                        help="the printed figures of graphs without records (default: RECORDS/graphs-0-1.json)")
    args = parser.parse_args(argv)
    printed = args.printed or args.records / "graphs-0-1.json"
    if not printed.is_file():
        sys.exit(f"no printed figures at {printed}")
    sweep = per_graph(args.records, printed)
    print(table(sweep))
    figure(sweep, args.png)
    print(f"\nwrote {args.png}")


if __name__ == "__main__":
    main(sys.argv[1:])
