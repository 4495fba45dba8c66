"""Each mechanism alone over several training seeds: the homogeneous table of docs/results/mqar.md.

Usage (from the repository root)::

    python -m docs.results.mqar.seed_table FOLDER [FOLDER ...] [--pick MECHANISM]

Each FOLDER holds one training seed's runs, one folder per mechanism with its ``metrics.json``
(``attnas search RECIPE --set seed=S`` with the ``fixed`` strategy, as in
``docs/results/mqar/records``). Prints Markdown: per mechanism its test accuracy on every seed,
the mean ± std over the seeds (:func:`attnas.comparison.stats.summarise`) and the mean validation accuracy; then the
best mechanism by mean VALIDATION accuracy (ties: the first in the space's order) and, with
``--pick``, how far the search's pick lies below the best mean test accuracy.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from attnas.comparison.stats import summarise
from docs.results.mqar.tables import homogeneous


def seed_rows(folders: list[Path]) -> dict[str, list[tuple[float, float]]]:
    """``{mechanism: [(validation, test) per folder]}`` for the mechanisms every folder holds."""
    per_seed = [homogeneous([f]) for f in folders]
    common = [m for m in per_seed[0] if all(m in seed for seed in per_seed)]
    return {m: [seed[m] for seed in per_seed] for m in common}


def table(rows: dict[str, list[tuple[float, float]]], pick: str | None = None,
          names: list[str] | None = None) -> str:
    """The Markdown table and the lines under it (``names``: a column title per seed's folder)."""
    n = len(next(iter(rows.values())))
    names = names or [f"seed {k + 1} of {n}" for k in range(n)]
    lines = ["| mechanism | " + " | ".join(f"test, {name}" for name in names)
             + " | test, mean ± std | validation, mean |", "|---" * (n + 3) + "|"]
    means = {}
    for m, runs in rows.items():
        test, val = [100 * t for _, t in runs], [100 * v for v, _ in runs]
        summary = summarise(test)
        mean, std = summary["mean"], summary["std"]
        means[m] = mean
        lines.append(f"| `{m}` | " + " | ".join(f"{t:.1f}" for t in test) + f" | {mean:.1f} ± {std:.1f} | "
                     f"{statistics.fmean(val):.1f} |")
    by_val = max(rows, key=lambda m: statistics.fmean(v for v, _ in rows[m]))
    best = max(means.values())
    lines.append("")
    lines.append(f"Best by mean validation accuracy: `{by_val}` ({means[by_val]:.1f} test); best mean test "
                 f"{best:.1f}; within 2 points of it: " + ", ".join(f"`{m}`" for m in rows if best - means[m] <= 2))
    if pick is not None:
        if pick not in means:
            raise SystemExit(f"--pick {pick!r}: no runs of that mechanism in every folder")
        lines.append(f"Pick `{pick}`: {means[pick]:.1f}, {best - means[pick]:.1f} points below the best mean.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--pick", default=None)
    args = parser.parse_args(argv)
    rows = seed_rows(args.folders)
    if not rows:
        raise SystemExit("no mechanism has a metrics.json in every folder")
    print(table(rows, args.pick, [f.name for f in args.folders]))


if __name__ == "__main__":
    main()
