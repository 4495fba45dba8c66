"""Tables of the heterophily comparisons: one ``attnas compare`` folder per dataset and search seed.

Reads ``<runs>/<dataset>-s<seed>/compare.json`` and prints, per dataset, each row's test
score (mean +- std over the ten fixed splits, per search seed and pooled), the found
architectures, and the verdicts pooled over search seeds: paired t-tests over
(split, search seed) pairs, the best baseline being the one with the best mean VALIDATION
score (so the choice of the comparator uses no test labels).

    python -m docs.results.heterophilous.tables runs/hetero texas wisconsin
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from attnas.comparison.stats import paired_verdict


def load(runs: Path, dataset: str) -> list[dict]:
    """The dataset's comparisons, each with its search seed (from the folder name ``<dataset>-s<seed>``)."""
    out = []
    for f in sorted(runs.glob(f"{dataset}-s*/compare.json")):
        out.append({**json.loads(f.read_text()), "search_seed": int(f.parent.name.rsplit("-s", 1)[1])})
    return out


def pooled(results: list[dict], name: str, split: str = "test") -> list[float]:
    return [s for r in results for row in r["rows"] if row["name"] == name for s in row[f"{split}_per_seed"]]


def pct(xs: list[float]) -> str:
    """``mean ± std`` in percent (the mean alone for a single score: one retraining seed per search)."""
    spread = f" ± {100 * statistics.stdev(xs):.1f}" if len(xs) > 1 else ""
    return f"{100 * statistics.fmean(xs):.1f}{spread}"


def retraining_unit(result: dict) -> str:
    """What one comparison's retraining seeds are: ``K splits`` when each seed trains on its own
    split (``task.split: per-seed``), else ``K trainings`` on one split (the search seed's or a fixed one)."""
    k = len(result["rows"][0]["test_per_seed"])
    split = result.get("task", {}).get("split", "per-seed")
    if split == "per-seed":
        return f"{k} split{'s' * (k != 1)}"
    where = "its search seed's split" if split == "search-seed" else f"split {split}"
    return f"{k} training{'s' * (k != 1)} on {where}"


def table(dataset: str, results: list[dict]) -> str:
    names = [row["name"] for row in results[0]["rows"]]
    lines = [f"### {dataset} ({len(results)} search seeds x {retraining_unit(results[0])})", "",
             "| row | " + " | ".join(f"search seed {r['search_seed']}" for r in results) + " | pooled test | pooled val |",
             "|---|" + "---|" * (len(results) + 2)]
    for name in names:
        per = [pct([s for row in r["rows"] if row["name"] == name for s in row["test_per_seed"]]) for r in results]
        lines.append(f"| {name} | " + " | ".join(per) + f" | {pct(pooled(results, name))} | "
                     f"{pct(pooled(results, name, 'val'))} |")
    baselines = [n for n in names if n not in ("search", "random")]
    best = max(baselines, key=lambda n: statistics.fmean(pooled(results, n, "val")))
    lines += ["", f"Best baseline by validation: {best}.", ""]
    for a, b in (("search", best), ("search", "random"), ("search", "gat")):
        v = paired_verdict(pooled(results, a), pooled(results, b), a, b)
        lines.append(f"- {a} vs {b}: {v['verdict']} ({100 * v['diff_mean']:+.1f} points, p = {v['p_value']:.3g}, "
                     f"{v['n']} pairs)")
    lines += ["", "Found architectures: " + "; ".join(
        f"seed {r['search_seed']}: `{row['arch']}`" for r in results for row in r["rows"] if row["name"] == "search"),
        "Random search's: " + "; ".join(
        f"seed {r['search_seed']}: `{row['arch']}`" for r in results for row in r["rows"] if row["name"] == "random"),
        "Search seconds: " + ", ".join(str(row["search_seconds"]) for r in results for row in r["rows"]
                                       if row["name"] == "search"), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    runs = Path(sys.argv[1])
    for ds in sys.argv[2:]:
        res = load(runs, ds)
        if res:
            print(table(ds, res))
