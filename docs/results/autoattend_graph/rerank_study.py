"""How well a one-shot search's final choice among its top candidates could be made.

A one-shot search (AutoAttend, Sec. 5.2.3) re-ranks its top-k supernet candidates and
keeps the best validation score. This trains every one of the top-k candidates of a
finished search with the run's final-training protocol (its ``retrain`` section) and
several seeds, then asks which selection rule would have picked the candidate that
tests best:

- ``re-rank``: the run's own re-ranking score (as logged in ``events.jsonl``);
- ``supernet``: the supernet's score alone (the top-1 candidate);
- ``val, top K, N seeds``: the highest mean validation score over N of the trainings
  among the best K by supernet score, averaged over every choice of N of the seeds
  (the expected test accuracy of that rule's pick);
- ``oracle``: the candidate with the best mean test accuracy (the ceiling of any rule).

Every figure is a mean test accuracy (%) of the picked candidate over all its trainings.
``train`` appends one JSON line per training to ``--out`` and skips those already there,
so it resumes after a kill and two processes can split the work (``--part 0/2``, ``1/2``).

Usage::

    python -m docs.results.autoattend_graph.rerank_study train runs/t5/aa-cora-s0 --out runs/rerank/cora-s0.jsonl --seeds 5
    python -m docs.results.autoattend_graph.rerank_study summary runs/rerank/cora-s*.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

import yaml


def train(run_dir: str, out: Path, seeds: int, top_k: int, init: str, part: tuple[int, int],
          overrides: dict | None = None) -> None:
    """Train each of the run's ``top_k`` candidates ``seeds`` times, one JSON line each.

    ``overrides`` replaces fields of the run's ``retrain`` section (e.g. ``{"lr": 5e-4}``).
    """
    from attnas.core.arch import Arch
    from attnas.pipeline import train_final
    from benchmarks._common import open_search

    found = open_search(run_dir)
    run, config, chosen, space, task = found.run, found.config, found.chosen, found.space, found.task
    strategy = found.strategy if init == "supernet" else None
    ranked = sorted(found.population, key=lambda p: -p["score"])[:top_k]
    reranked = {json.dumps(e["arch"], sort_keys=True): e["val"] for e in run.events("rerank")}
    done = set()
    if out.exists():
        done = {(r["rank"], r["seed"]) for r in map(json.loads, out.read_text().splitlines())}
    settings = replace(config.retrain, init=init, **(overrides or {}))
    metric = task.metric
    jobs = [(i, k) for i in range(len(ranked)) for k in range(seeds)]
    for j, (i, k) in enumerate(jobs):
        if j % part[1] != part[0] or (i, k) in done:
            continue
        t0 = time.perf_counter()
        arch = Arch(space.name, ranked[i]["arch"])
        res = train_final(None, config, space, task, strategy, arch, train=settings, seed=config.seed + 100 + k)
        row = {"rank": i, "seed": k, "init": init, "supernet": ranked[i]["score"],
               "rerank": reranked.get(json.dumps(ranked[i]["arch"], sort_keys=True)),
               "retrain": overrides or {}, "val": res.val, "test": res.test, "metric": metric, "epochs": res.epochs,
               "arch": space.describe(arch), "chosen": ranked[i]["arch"] == chosen.choices,
               "seconds": round(time.perf_counter() - t0, 2)}
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"candidate {i} seed {k}: val {res.val:.4f} test {res.test:.4f}", flush=True)


def rules(rows: list[dict], top_ks: tuple[int, ...], seed_counts: tuple[int, ...]) -> dict[str, float]:
    """Mean test accuracy (%) of each selection rule's pick (see the module docstring)."""
    by: dict[int, dict[int, dict]] = {}
    for r in rows:
        by.setdefault(r["rank"], {})[r["seed"]] = r
    seeds = sorted(set.intersection(*(set(v) for v in by.values())))
    test = {i: 100 * statistics.fmean(by[i][k]["test"] for k in seeds) for i in by}
    out = {"supernet": test[min(by)],
           "oracle": max(test.values()),
           "mean of the top-k": statistics.fmean(test.values())}
    if all(by[i][seeds[0]].get("rerank") is not None for i in by):
        out["re-rank"] = test[max(by, key=lambda i: (by[i][seeds[0]]["rerank"], -i))]
    for k_top in top_ks:
        ranks = [i for i in sorted(by) if i < k_top]
        for n in seed_counts:
            if n > len(seeds):
                continue
            picks = [test[max(ranks, key=lambda i: (statistics.fmean(by[i][s]["val"] for s in sub), -i))]
                     for sub in itertools.combinations(seeds, n)]
            out[f"val, top {k_top}, {n} seed{'s' if n > 1 else ''}"] = statistics.fmean(picks)
    return out


def summary(files: list[str], top_ks: tuple[int, ...], seed_counts: tuple[int, ...]) -> str:
    """A markdown table: one column per file (search run), one row per rule, and their mean."""
    tables = [rules([json.loads(line) for line in Path(f).read_text().splitlines()], top_ks, seed_counts)
              for f in files]
    names = [n for n in tables[0] if all(n in t for t in tables)]
    lines = ["| rule | " + " | ".join(Path(f).stem for f in files) + " | mean |",
             "|---|" + "---|" * (len(files) + 1)]
    for n in names:
        vals = [t[n] for t in tables]
        lines.append(f"| {n} | " + " | ".join(f"{v:.2f}" for v in vals) + f" | {statistics.fmean(vals):.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train the top-k candidates of a finished one-shot search")
    t.add_argument("run_dir")
    t.add_argument("--out", required=True, type=Path)
    t.add_argument("--seeds", type=int, default=5)
    t.add_argument("--top-k", type=int, default=10)
    t.add_argument("--init", choices=("supernet", "scratch"), default="supernet")
    t.add_argument("--part", default="0/1", help="I/N: this process takes every N-th training from the I-th")
    t.add_argument("--retrain", action="append", default=[], metavar="KEY=VALUE",
                   help="replace a field of the run's retrain section, e.g. lr=0.0005 (repeatable)")
    s = sub.add_parser("summary", help="the selection rules' picks, as a markdown table")
    s.add_argument("files", nargs="+")
    s.add_argument("--top-k", default="3,5,10")
    s.add_argument("--seeds", default="1,2,3,5")
    args = ap.parse_args()
    if args.command == "train":
        i, n = (int(x) for x in args.part.split("/"))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        overrides = {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.retrain)}
        train(args.run_dir, args.out, args.seeds, args.top_k, args.init, (i, n), overrides)
    else:
        print(summary(args.files, tuple(int(x) for x in args.top_k.split(",")),
                      tuple(int(x) for x in args.seeds.split(","))))


if __name__ == "__main__":
    main()
