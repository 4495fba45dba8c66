"""Ties at the top of a one-shot search: would the supernet's validation loss choose better?

The supernet's validation accuracy of a transductive graph task moves in steps of one node
(1/500 on Cora), so several candidates often share the best score and the search keeps the
first one evaluated. For each finished one-shot run this lists the candidates tied at the
best score, scores each by its validation cross-entropy with supernet weights (evaluation
mode), and trains the lowest-loss one with the run's final-training protocol and
``--seeds`` seeds when it is not the run's own choice. One JSON line per run goes to
``--out``: the tie, the losses, the choice by loss, and its test accuracy per seed.

Usage::

    python -m docs.results.autoattend_graph.tie_break_study runs/t5/cora-s0/search runs/t5/cora-s1/search --out runs/ties.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def study(run_dir: str, seeds: int) -> dict:
    """The tie at the top of ``run_dir``'s population and what the loss would pick."""
    import torch

    from attnas.core.arch import Arch
    from attnas.pipeline import train_final
    from benchmarks._common import open_search

    found = open_search(run_dir)
    config, chosen, space, task, strategy = found.config, found.chosen, found.space, found.task, found.strategy
    supernet, population = found.supernet, found.population
    top = max(p["score"] for p in population)
    tied = [p["arch"] for p in population if p["score"] == top]
    batch = next(iter(task.batches("val")))
    losses = []
    with torch.no_grad():
        for choices in tied:
            losses.append(task.loss(supernet(batch, Arch(space.name, choices)), batch).item())
    pick = tied[min(range(len(tied)), key=losses.__getitem__)]
    row = {"run": str(run_dir), "score": top, "tied": len(tied), "losses": losses,
           "chosen_is_lowest_loss": pick == chosen.choices, "pick": space.describe(Arch(space.name, pick)),
           "chosen": space.describe(chosen)}
    if pick != chosen.choices:
        tests = [train_final(None, config, space, task, strategy, Arch(space.name, pick),
                             seed=config.seed + 100 + k).test for k in range(seeds)]
        row.update(pick_test=tests, pick_test_mean=statistics.fmean(tests))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for r in args.runs:
        row = study(r, args.seeds)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps({k: v for k, v in row.items() if k != "pick_test"}), flush=True)


if __name__ == "__main__":
    main()
