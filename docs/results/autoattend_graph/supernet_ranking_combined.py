"""Ranking quality of several supernets' scores together: the mean of each architecture's
scores under every supernet, against the stand-alone results.

Takes ranking summaries of ``docs/results/autoattend_graph/supernet_ranking.py`` that share their stand-alone
architectures (one ``--out`` folder, one ``--label`` per supernet) and prints, for each
supernet alone and for the mean of their scores, Kendall's tau and Spearman's rho against
the stand-alone validation and test means, and the stand-alone test of the top-scored
architecture; first, how well the stand-alone validation itself ranks by test (what a
perfect supernet, which ranks by validation, could reach).

Usage::

    python -m docs.results.autoattend_graph.supernet_ranking_combined runs/ranking-cs/ranking-swa-s0.json \\
        runs/ranking-cs/ranking-swa-s1.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from attnas.reporting.ranking import rank_correlations


def _row(name: str, scores: list[float], val: list[float], test: list[float]) -> str:
    v, t = rank_correlations(scores, val), rank_correlations(scores, test)
    top = max(range(len(scores)), key=lambda i: (scores[i], -i))  # ties to the earlier architecture
    return (f"| {name} | {v['kendall_tau']:.2f} | {v['spearman_rho']:.2f} | {t['kendall_tau']:.2f} | "
            f"{t['spearman_rho']:.2f} | {100 * test[top]:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rankings", nargs="+", type=Path, help="ranking-*.json files of the same architectures")
    args = ap.parse_args()
    summaries = [json.loads(p.read_text()) for p in args.rankings]
    archs = [r["arch"] for r in summaries[0]["rows"]]
    for path, s in zip(args.rankings, summaries):
        if [r["arch"] for r in s["rows"]] != archs:
            raise SystemExit(f"error: {path} ranks other architectures than {args.rankings[0]}")
    val = [r["val_mean"] for r in summaries[0]["rows"]]
    test = [r["test_mean"] for r in summaries[0]["rows"]]
    per_supernet = [[r["supernet"] for r in s["rows"]] for s in summaries]
    agree = rank_correlations(val, test)
    print(f"{len(archs)} architectures; stand-alone test: mean {100 * sum(test) / len(test):.1f}, "
          f"best {100 * max(test):.1f}, best by validation {100 * test[val.index(max(val))]:.1f}; "
          f"stand-alone validation against test: tau {agree['kendall_tau']:.2f}, rho {agree['spearman_rho']:.2f}\n")
    print("| supernet scores | tau (val) | rho (val) | tau (test) | rho (test) | top-1's stand-alone test [%] |")
    print("|---|---|---|---|---|---|")
    for path, scores in zip(args.rankings, per_supernet):
        print(_row(path.stem, scores, val, test))
    mean = [sum(column) / len(column) for column in zip(*per_supernet)]
    print(_row(f"mean of the {len(per_supernet)}", mean, val, test))


if __name__ == "__main__":
    main()
