"""Does the search's own pick beat random search's with the same supernet? Paired over runs.

For each finished one-shot run scored by both ``supernet_top_candidates.py`` (the search's
top 10 by supernet validation score, with their test accuracy) and
``supernet_selection_noise.py`` (prior samples scored with the same supernet), this sets the
search's top 1 and top-10 mean beside random search's (the best-by-validation prior sample
and the 10 best): test accuracy with supernet weights, and the validation score of each
top 10. A paired t-test over the runs says whether the differences are more than chance.
``weight_decay_sweep.sh`` writes both files for each run
(``RUN.top.jsonl``, ``RUN.noise.jsonl``).

Usage::

    python -m docs.results.autoattend_graph.search_vs_random_pick runs/wd-sweep/*.top.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def noise_file(top_file: Path) -> Path:
    """The ``RUN.noise.jsonl`` beside ``RUN.top.jsonl``."""
    return top_file.with_name(top_file.name.replace(".top.", ".noise."))


def pair(top_file: Path) -> dict:
    """The search's and random search's picks of one run (its ``.top.jsonl`` and ``.noise.jsonl``)."""
    top = json.loads(top_file.read_text().splitlines()[0])
    noise = json.loads(noise_file(top_file).read_text().splitlines()[0])
    val, test = noise["val"], noise["test"]
    order = sorted(range(len(val)), key=lambda i: (-val[i], i))  # ties: the earlier sample, as a search takes them
    return {"search_top1": top["top1_test"], "random_top1": test[order[0]],
            "search_top10": top["top_test_mean"], "random_top10": statistics.mean(test[i] for i in order[:10]),
            "search_top10_val": statistics.mean(c["score"] for c in top["top"]),
            "random_top10_val": statistics.mean(val[i] for i in order[:10])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("top_files", nargs="+", type=Path, help="RUN.top.jsonl files with a RUN.noise.jsonl beside each")
    args = p.parse_args()
    from scipy.stats import ttest_rel

    rows = [pair(f) for f in args.top_files if noise_file(f).exists()]
    print(f"{len(rows)} runs | search | random search | difference (random - search) | paired t-test p | random better / worse")
    for what in ("top1", "top10", "top10_val"):
        s, r = [x[f"search_{what}"] for x in rows], [x[f"random_{what}"] for x in rows]
        diff = statistics.mean(r) - statistics.mean(s)
        better = sum(b > a for a, b in zip(s, r))
        worse = sum(b < a for a, b in zip(s, r))
        print(f"{what} | {100 * statistics.mean(s):.2f} | {100 * statistics.mean(r):.2f} | {100 * diff:+.2f} | "
              f"{ttest_rel(r, s).pvalue:.3f} | {better} / {worse}")


if __name__ == "__main__":
    main()
