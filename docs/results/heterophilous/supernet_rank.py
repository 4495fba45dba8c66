"""Does the supernet rank architectures as training them alone does? (AutoAttend's one-shot search)

A finished search run logs every architecture its evolution scored with the supernet's weights
(``events.jsonl``, phase ``evolution``; stage 0 is the initial population, drawn from the
space's prior). This trains, from scratch and alone, ``n_prior`` of those prior draws (chosen
uniformly, seeded) and the ``n_top`` architectures the supernet scored highest, each with
``seeds`` training seeds under the run's own retraining budget on the run's own split, and
compares the supernet's score with the stand-alone VALIDATION score (test is recorded, never
used to choose):

- Kendall's tau between supernet score and stand-alone validation over the prior draws (does
  the supernet order the space?) and over the top architectures (does it order the best?);
- the stand-alone validation of the supernet's top architectures against that of the prior
  draws (does choosing by supernet score give better architectures than drawing at random?).

Each trained architecture is cached in ``<out>/<hash>.json``, so an interrupted run resumes.

    ATTNAS_DATA=../shared/data python -m docs.results.heterophilous.supernet_rank \
        runs/hetero/squirrel-s4/search runs/supernet-rank/squirrel-s4 --n-prior 30 --n-top 10 --seeds 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
from pathlib import Path

import torch
from scipy.stats import kendalltau, mannwhitneyu

from attnas.config import load_config
from attnas.data.root import resolve_data_root
from attnas.pipeline import train_final
from attnas.runs.build import build_space, build_task
from benchmarks._common import supernet_scored


def choose(scored: list[dict], n_prior: int, n_top: int, seed: int) -> tuple[list[dict], list[dict]]:
    """``n_prior`` prior draws (uniform over stage 0) and the ``n_top`` best by supernet score."""
    prior = [s for s in scored if s["stage"] == 0]
    picked = random.Random(seed).sample(prior, min(n_prior, len(prior)))
    top = sorted(scored, key=lambda s: -s["score"])[:n_top]
    return picked, top


def stand_alone(config, task, space, out: Path, arch: dict, seeds: int) -> dict:
    """Validation and test of ``arch`` trained alone ``seeds`` times under the run's ``config``
    on its ``task`` (its split) and ``space`` (cached)."""
    key = json.dumps(arch, sort_keys=True)
    f = out / f"{hashlib.sha1(key.encode()).hexdigest()[:12]}.json"
    if f.exists():
        return json.loads(f.read_text())
    vals, tests = [], []
    for k in range(seeds):
        res = train_final(None, config, space, task, None, space.arch(arch), seed=config.seed + 100 + k)
        vals.append(res.val)
        tests.append(res.test)
    row = {"arch": arch, "val": statistics.mean(vals), "test": statistics.mean(tests), "vals": vals, "tests": tests}
    f.write_text(json.dumps(row))
    return row


def summary(prior: list[dict], top: list[dict]) -> dict:
    """Rank agreement and the top architectures' stand-alone validation against the prior's."""
    tau_prior = kendalltau([p["score"] for p in prior], [p["val"] for p in prior])
    tau_top = kendalltau([t["score"] for t in top], [t["val"] for t in top])
    vp, vt = [p["val"] for p in prior], [t["val"] for t in top]
    return {"tau_prior": tau_prior.statistic, "p_tau_prior": tau_prior.pvalue,
            "tau_top": tau_top.statistic, "p_tau_top": tau_top.pvalue,
            "prior_val_mean": statistics.mean(vp), "top_val_mean": statistics.mean(vt),
            "prior_val_max": max(vp), "top_val_max": max(vt),
            "p_top_above_prior": mannwhitneyu(vt, vp, alternative="greater").pvalue,
            "prior_test_mean": statistics.mean(p["test"] for p in prior),
            "top_test_mean": statistics.mean(t["test"] for t in top)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a finished one-shot search run folder")
    parser.add_argument("out", type=Path)
    parser.add_argument("--n-prior", type=int, default=30)
    parser.add_argument("--n-top", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="which prior draws are trained")
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    prior, top = choose(supernet_scored(args.run), args.n_prior, args.n_top, args.seed)
    config = load_config(args.run / "config.yaml")  # the run's task (its split), space and retraining
    task, space = build_task(config, resolve_data_root(), torch.device("cpu")), build_space(config)
    rows = {}
    for s in top + prior:
        if s["key"] not in rows:
            rows[s["key"]] = {**s, **stand_alone(config, task, space, args.out, s["arch"], args.seeds)}
            print(f"supernet {100 * s['supernet']:.2f}  alone val {100 * rows[s['key']]['val']:.2f}"
                  f"  (test {100 * rows[s['key']]['test']:.2f})", flush=True)
    result = summary([rows[p["key"]] for p in prior], [rows[t["key"]] for t in top])
    (args.out / "summary.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
