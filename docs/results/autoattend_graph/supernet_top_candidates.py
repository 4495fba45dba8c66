"""How good is what a one-shot supernet puts at the top? Test accuracy of its top candidates.

On transductive graph tasks the final model of a one-shot search is the supernet's weights
(fine-tuning at the recipe's ``finetune_lr`` keeps them), so the quality of a search is the
test accuracy those weights give the candidates the supernet ranks highest. For each
finished one-shot run this scores, with supernet weights in evaluation mode:

- the ``--top`` distinct candidates with the best supernet validation score (ties in the
  order they were evaluated, as the search takes them): their test accuracy, its mean and
  maximum (the best a perfect choice among them could do);
- ``--prior`` architectures drawn from the space's prior (``--sample-seed``): their mean
  validation accuracy, the measure of the paper's Table 7 (``--prior 0``: skipped);
- the test accuracy of the best candidate of the search's own random start (an
  evolution's first stage, drawn from the prior): what the search would have chosen
  without its mutations.

One JSON line per run goes to ``--out``; a table of all runs is printed.

Usage::

    python -m docs.results.autoattend_graph.supernet_top_candidates runs/aa-cora-s0 runs/aa-cora-s1 --out runs/top.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path


def study(run_dir: str, top: int, prior: int, sample_seed: int) -> dict:
    """Supernet-weight test accuracy of ``run_dir``'s top candidates and its prior mean."""
    import torch

    from attnas.core.arch import Arch
    from benchmarks._common import open_search

    found = open_search(run_dir)
    chosen, space, task, supernet = found.chosen, found.space, found.task, found.supernet
    ranked, seen = [], set()
    for p in sorted(found.population, key=lambda p: -p["score"]):  # stable: ties keep the evaluation order
        key = json.dumps(p["arch"], sort_keys=True)
        if key not in seen:
            seen.add(key)
            ranked.append(p)

    def accuracy(arch: Arch, split: str) -> float:
        with torch.no_grad():
            return task.evaluate(lambda batch: supernet(batch, arch), split)

    best = [{"arch": space.describe(Arch(space.name, p["arch"])), "score": p["score"],
             "test": accuracy(Arch(space.name, p["arch"]), "test")} for p in ranked[:top]]
    # the best of the search's own random start (an evolution's stage 0, drawn from the prior)
    start = next((p for p in ranked if p.get("stage", 0) == 0), None)
    rng = random.Random(sample_seed)
    prior_val = [accuracy(space.sample(rng), "val") for _ in range(prior)]
    metrics = found.run.read_json(found.run.METRICS)
    tests = [b["test"] for b in best]
    return {"run": str(run_dir), "chosen": space.describe(chosen), "final_test": metrics.get("test_accuracy"),
            "top": best, "top1_test": tests[0], "top_test_mean": statistics.fmean(tests), "top_test_max": max(tests),
            "top1_stage": ranked[0].get("stage", 0),
            "start_top1_test": None if start is None else accuracy(Arch(space.name, start["arch"]), "test"),
            "prior_val_mean": statistics.fmean(prior_val) if prior_val else None, "prior": prior,
            "sample_seed": sample_seed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--prior", type=int, default=100)
    ap.add_argument("--sample-seed", type=int, default=1234)
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print("| run | final test | top-1 test | top-%d test mean | max | prior val mean | best of the random start: test |"
          % args.top)
    print("|---|---|---|---|---|---|---|")
    for r in args.runs:
        row = study(r, args.top, args.prior, args.sample_seed)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        pct = lambda x: "-" if x is None else f"{100 * x:.2f}"  # noqa: E731
        print(f"| {r} | {pct(row['final_test'])} | {pct(row['top1_test'])} | {pct(row['top_test_mean'])} | "
              f"{pct(row['top_test_max'])} | {pct(row['prior_val_mean'])} | {pct(row['start_top1_test'])} |", flush=True)


if __name__ == "__main__":
    main()
