"""Pool ``attnas compare`` folders of one recipe run for different search seeds into one comparison.

A comparison over several search seeds run as separate commands (``attnas compare RECIPE
--set seed=S --search-seeds 1``, one per search seed, e.g. side by side or one after the
other) is pooled exactly as one ``--search-seeds K`` command pools its own folders: with
compare's :func:`attnas.comparison.runner.pool_search_seeds`, verdicts paired over the
search seeds' means (the best baseline chosen by mean VALIDATION score). A folder of a
``--search-seeds K`` command contributes its ``search-seed-*`` sub-folders. Every folder
must hold the same rows of the same recipe (only the seed differs).

    python -m docs.results.heterophilous.pool_compares runs/ms-deep/pooled runs/ms-deep/cmp-s0 runs/ms-deep/cmp-s1 ...

Writes ``compare.json``, ``compare.md`` and ``compare.png`` into the first argument and
prints the verdicts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from attnas.comparison.report import write_compare_files
from attnas.comparison.runner import PLAN, RESULT, pool_search_seeds
from attnas.runs.atomic_files import atomic_write_json


def single_seed_folders(folders: list[Path]) -> list[Path]:
    """Each folder's single-search-seed comparisons: itself, or its ``search-seed-*`` sub-folders."""
    out = []
    for f in folders:
        subs = sorted(f.glob("search-seed-*/"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
        out.extend(subs or [f])
    return out


def pool(folders: list[Path]) -> dict:
    """The pooled comparison of the folders' finished single-search-seed comparisons."""
    results = [json.loads((f / RESULT).read_text()) for f in folders]
    plans = [json.loads((f / PLAN).read_text()) for f in folders]
    names = [[r["name"] for r in res["rows"]] for res in results]
    if any(n != names[0] for n in names) or any(p["recipe"] != plans[0]["recipe"] for p in plans):
        raise SystemExit("the folders hold different rows or recipes: " + ", ".join(map(str, folders)))
    seeds = [row["recipe"]["seed"] for p in plans for row in p["rows"] if row["name"] == "search"]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"search seeds repeat: {seeds}")
    recipe = next(row["recipe"] for row in plans[0]["rows"] if row["name"] == "search")
    return pool_search_seeds(recipe, results, [str(f) for f in folders])


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        raise SystemExit(__doc__)
    out = Path(argv[1])
    result = pool(single_seed_folders([Path(a) for a in argv[2:]]))
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / RESULT, result)
    write_compare_files(out, result)
    for row in result["rows"]:
        print(f"{row['name']:>12}: test {100 * row['test']['mean']:.2f} ± {100 * row['test']['std']:.2f}, "
              f"val {100 * row['val']['mean']:.2f}; per search seed "
              + ", ".join(f"{100 * x:.2f}" for x in row["test_per_search"]))
    for v in result["verdicts"]:
        print(v["sentence"])


if __name__ == "__main__":
    main(sys.argv)
