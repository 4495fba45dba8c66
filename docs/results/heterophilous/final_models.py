"""Search against random search by each run's own final model, paired over search seeds.

A search run ends by training its architecture once from scratch (``model.pt``; training
seed = the recipe's seed, so the search and random-search rows of one search seed train
with the same seed on the same split). Before ``attnas compare`` has retrained the rows,
those final models already pair the two searches: this reads ``val_<metric>`` and
``test_<metric>`` from each folder's ``search/metrics.json`` and ``random/metrics.json``
and applies compare's paired t-test (:func:`attnas.comparison.stats.paired_verdict`) over
the folders (one per search seed). Validation and test are of the final model only; no
choice is made here. For searches that train their candidates (``evolution-trained``,
``random-trained``) the pick's own validation score in the search (its brief training,
``<prefix>_best_val_<metric>``) is paired as well.

    python -m docs.results.heterophilous.final_models roc_auc runs/ms-deep/cmp-s0 runs/ms-deep/cmp-s1 runs/ms-deep/cmp-s2
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from attnas.comparison.stats import paired_verdict

ROWS = ("search", "random")


def final_scores(folders: list[Path], metric: str) -> dict[str, dict[str, list[float]]]:
    """Per row, its final models' validation and test scores, one per folder."""
    out = {row: {"val": [], "test": [], "arch": [], "candidate": []} for row in ROWS}
    for f in folders:
        for row in ROWS:
            m = json.loads((f / row / "metrics.json").read_text())
            out[row]["val"].append(m[f"val_{metric}"])
            out[row]["test"].append(m[f"test_{metric}"])
            out[row]["arch"].append(m["arch"])
            out[row]["candidate"].append(candidate_score(m, metric))
    return out


def later_candidates(folder: Path, metric: str) -> dict[str, float] | None:
    """Mean validation score of the candidates an evolution trained after its initial
    population (its children) and of random search's candidates with the same indices
    (prior draws), or ``None`` where the search row is not ``evolution-trained``."""
    config = yaml.safe_load((folder / "search" / "config.yaml").read_text())
    if config["strategy"]["name"] != "evolution-trained":
        return None
    first = config["strategy"]["population"]
    out = {}
    for row in ROWS:
        events = [json.loads(line) for line in (folder / row / "events.jsonl").read_text().splitlines()]
        scores = [e[f"val_{metric}"] for e in events if e.get("candidate", -1) >= first]
        out[row] = sum(scores) / len(scores)
    return out


def candidate_score(metrics: dict, metric: str) -> float | None:
    """The search's own validation score of its pick (a trained-candidate search's
    ``<prefix>_best_val_<metric>``: the brief training's), or ``None`` where the run has not
    exactly one such entry."""
    keys = [k for k in metrics if k.endswith(f"_best_val_{metric}")]
    return metrics[keys[0]] if len(keys) == 1 else None


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        raise SystemExit(__doc__)
    metric, folders = argv[1], [Path(a) for a in argv[2:]]
    scores = final_scores(folders, metric)
    for row in ROWS:
        print(f"{row}: test " + ", ".join(f"{100 * x:.2f}" for x in scores[row]["test"])
              + "; val " + ", ".join(f"{100 * x:.2f}" for x in scores[row]["val"]))
        for f, arch in zip(folders, scores[row]["arch"]):
            print(f"  {f}: {arch}")
    splits = ["test", "val"]
    if all(x is not None for row in ROWS for x in scores[row]["candidate"]):
        splits.append("candidate")  # the brief training's validation score of each search's pick
        for row in ROWS:
            print(f"{row}: pick's validation score in the search " + ", ".join(
                f"{100 * x:.2f}" for x in scores[row]["candidate"]))
    later = [later_candidates(f, metric) for f in folders]
    if all(x is not None for x in later):  # do mutations of tournament winners beat fresh draws?
        v = paired_verdict([x["search"] for x in later], [x["random"] for x in later], "search", "random",
                           unit="search seeds")
        print("mean validation score of the candidates after the initial population (evolution: children; "
              f"random: draws): {v['sentence']}")
    for split in splits:
        v = paired_verdict(scores["search"][split], scores["random"][split], "search", "random", unit="search seeds")
        print(f"{split}: {v['sentence']}")


if __name__ == "__main__":
    main(sys.argv)
