"""Tables of docs/results/mqar.md from the run folders: each mechanism alone, the searches' picks, Spearman.

Usage (from the repository root)::

    python -m docs.results.mqar.tables FOLDER[:FOLDER...] SEARCH_RUN [SEARCH_RUN ...]

The first argument names folders (separated by ``:``) holding one run folder per mechanism
trained alone (the baseline rows of ``attnas compare`` or ``attnas search`` with the
``fixed`` strategy; the first folder holding a mechanism wins),
each with ``metrics.json``; the others are search runs (``metrics.json`` with
``drop_score_<mechanism>``). Prints Markdown: the homogeneous table (validation and test
accuracy, mean over the seeds found), and per search run its pick, the pick's distance to
the best homogeneous model (by test accuracy) and the Spearman rank correlation of its
drop scores with the stand-alone test accuracies (scipy's ``spearmanr``, ties averaged).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scipy.stats import spearmanr

ORDER = ("softmax", "linear", "performer", "linformer", "reformer", "local", "longformer", "bigbird", "sparse",
         "synthesizer-dense", "synthesizer-random")


def _mean(metrics: dict, split: str) -> float:
    for key in (f"{split}_accuracy_mean", f"{split}_accuracy"):
        if key in metrics:
            return float(metrics[key])
    raise KeyError(f"no {split} accuracy in metrics.json")


def homogeneous(folders: list[Path]) -> dict[str, tuple[float, float]]:
    """``{mechanism: (validation, test)}`` of every mechanism folder with a ``metrics.json``."""
    out = {}
    for m in ORDER:
        for folder in folders:
            path = folder / m / "metrics.json"
            if path.exists():
                metrics = json.loads(path.read_text())
                out[m] = (_mean(metrics, "val"), _mean(metrics, "test"))
                break
    return out


def main(folder: str, searches: list[str]) -> None:
    table = homogeneous([Path(f) for f in folder.split(":")])
    print("| mechanism | validation [%] | test [%] |\n|---|---|---|")
    for m, (val, test) in table.items():
        print(f"| `{m}` | {100 * val:.1f} | {100 * test:.1f} |")
    best = max(t for _, t in table.values())
    print("\n| search run | pick | pick's test [%] | best - pick [points] | Spearman (drop score vs test) |\n"
          "|---|---|---|---|---|")
    for run in searches:
        metrics = json.loads((Path(run) / "metrics.json").read_text())
        pick = json.loads((Path(run) / "arch.json").read_text())["choices"]["mechanism"]
        scored = [m for m in table if f"drop_score_{m}" in metrics]
        rho = spearmanr([metrics[f"drop_score_{m}"] for m in scored], [table[m][1] for m in scored]).statistic
        if isinstance(pick, str) and pick in table:
            gap = f"{100 * (best - table[pick][1]):.1f}"
            pick_test = f"{100 * table[pick][1]:.1f}"
        else:
            gap = pick_test = "—"
        print(f"| `{run}` | `{pick}` | {pick_test} | {gap} | {rho:.2f} ({len(scored)} mechanisms) |")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2:])
