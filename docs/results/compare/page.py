"""Write docs/results/compare.md from finished ``attnas compare`` folders.

Each folder's ``compare.json`` gives one section (its table and verdicts, as
``compare.md`` has them) with the command and the commit it was measured at; its
``compare.png`` is copied to docs/figures/. Nothing is typed by hand::

    python -m docs.results.compare.page --commit 8acebff \\
        "attnas compare autoattend-cora-quick --seeds 10"=runs/cmp/autoattend-cora-quick ...

A folder measured at another commit than ``--commit`` names it after an ``@``:
``"COMMAND"=FOLDER@COMMIT``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from attnas.comparison.report import compare_markdown
from attnas.comparison.runner import run_search_seconds
from attnas.runs.run_dir import RunDir

HERE = Path(__file__).resolve().parent
FIGURES = HERE.parents[1] / "figures"
INTRO = """# Is the search better than hand-designed attention? (`attnas compare`)

One recipe per method at CPU scale, each run by `attnas compare` (README, "Is it better on
my data?"): the recipe's search, random search in the same space at the search's compute,
and the hand-designed baselines of the space (each with its own paper's training protocol
where it declares one, else the recipe's `retrain`), every row retrained with the same
seeds. With `--search-seeds K` (default 3 for one-shot recipes) the verdicts are paired
t-tests over the K searches' means (two-sided, 5 %), the test over all training seeds
beside them; below three search seeds no verdict is given. The best baseline is the one
with the highest validation mean.
"""


def with_running_search_seconds(folder: Path, result: dict) -> dict:
    """The result with each searching row's ``search s`` read again from its run folders by
    :func:`~attnas.comparison.runner.run_search_seconds` (summed over search seeds), so a
    comparison written before that rule, whose search was stopped and resumed, is not charged
    the pause."""
    subs = [folder / f for f in result.get("folders", [])] or [folder]
    for row in result["rows"]:
        if row.get("search_seconds") is not None:
            seconds = [run_search_seconds(RunDir(sub / row["name"])) for sub in subs]
            if None not in seconds:
                row["search_seconds"] = round(sum(seconds), 2)
    return result


def section(command: str, folder: Path, commit: str, load: str) -> str:
    """One comparison's section: command, commit, table, verdicts and figure."""
    result = with_running_search_seconds(folder, json.loads((folder / "compare.json").read_text()))
    figure = f"compare_{result['recipe']}.png"
    shutil.copyfile(folder / "compare.png", FIGURES / figure)
    body = compare_markdown(result).replace("compare.png", f"../figures/{figure}")
    body = body.replace(f"# Is the search better? `{result['recipe']}`", f"## `{result['recipe']}`", 1)
    body = body.replace("\n## ", "\n### ").replace("\n### `", "\n## `", 1)
    head, rest = body.split("\n", 1)
    run_on = f"; machine load {load}" if load else ""
    return f"{head}\n\n`{command}` at commit {commit}{run_on}.\n{rest.split('Each row is a run directory')[0].rstrip()}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", required=True, help="The commit the comparisons were run at (unless a folder "
                        "names its own after an @).")
    parser.add_argument("--load", default="", help="The machine's load average during the runs.")
    parser.add_argument("runs", nargs="+", help='"COMMAND"=FOLDER[@COMMIT] pairs, in page order.')
    args = parser.parse_args()
    parts = [INTRO]
    for item in args.runs:
        command, folder = item.rsplit("=", 1)
        folder, _, commit = folder.partition("@")
        parts.append(section(command, Path(folder), commit or args.commit, args.load))
    (HERE.parent / "compare.md").write_text("\n".join(parts))
    print(f"wrote {HERE.parent / 'compare.md'} ({len(parts) - 1} comparisons)")


if __name__ == "__main__":
    main()
