"""Would a search that learns where good architectures are beat random search? An offline test.

The paper's evolution ends level with random search under a supernet whose validation
scores are noisy at the top (docs/results/autoattend_graph.md). This tests another search
at the same budget of supernet evaluations, the cross-entropy method over the
architecture's decisions: from the first half of the prior samples of
``supernet_selection_noise.py`` (already scored), the ``--elite`` best by validation set a
factorised distribution over the decisions (each layer's type, each input's operation and
source; add-one smoothing), and the second half of the budget is drawn from it (importance
resampling of a large pool of prior samples, so every draw obeys the space's constraints)
and scored with the same supernet. Both halves of the random samples serve once as the
start. For each run and start it prints, with supernet weights: the test accuracy of the
best-by-validation candidate of the search and of the 1,000 random samples, the test mean of
each one's 10 best by validation, and the test mean of the drawn candidates against the
prior's.

Usage::

    python -m docs.results.autoattend_graph.supernet_selection_noise runs/cora-s0 --out runs/noise.jsonl
    python -m docs.results.autoattend_graph.cem_vs_random runs/cora-s0 --noise runs/noise.jsonl --out runs/cem.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from collections import Counter
from pathlib import Path


def decisions(arch) -> list[str]:
    """The architecture's decisions as features: each layer's type, each input's operation and source."""
    out = []
    for n, layer in enumerate(arch.choices["layers"]):
        kind = layer["type"]
        out.append(f"L{n}.type={kind}")
        for i, inp in enumerate(layer["inputs"]):
            slot = "add" if kind == "add" else f"attn{i}"  # an addition's inputs are unordered
            out += [f"L{n}.{slot}.op={inp['op']}", f"L{n}.{slot}.src={inp['source']}"]
    return out


def study(run: str, noise: dict, elite: int, pool_size: int) -> list[dict]:
    """The cross-entropy method's pick and random search's, for each half of the samples as the start."""
    import torch

    from benchmarks._common import one_forward_per_batch, open_search, prior_samples

    found = open_search(run)
    space, task, supernet = found.space, found.task, found.supernet
    n = len(noise["val"])
    archs = prior_samples(space, n, noise.get("sample_seed", 12345))
    key = lambda a: json.dumps(a.choices, sort_keys=True)  # noqa: E731
    pool_rng = random.Random(777)
    pool = [space.sample(pool_rng) for _ in range(pool_size)]
    prior = Counter(x for a in pool for x in decisions(a))

    def score(arch) -> tuple[float, float]:
        forward = one_forward_per_batch(supernet, arch)
        with torch.no_grad():
            return task.evaluate(forward, "val", batch_size=10**9), task.evaluate(forward, "test", batch_size=10**9)

    def best(cands):  # by validation; ties: the earlier
        return max(range(len(cands)), key=lambda i: (cands[i][1], -i))

    def top10(cands):
        return statistics.mean(c[2] for c in sorted(cands, key=lambda c: -c[1])[:10])

    random_all = [(a, noise["val"][i], noise["test"][i]) for i, a in enumerate(archs)]
    rows = []
    for half in (0, 1):
        start = random_all[half * n // 2:(half + 1) * n // 2]
        elites = Counter(x for a, _, _ in sorted(start, key=lambda c: -c[1])[:elite] for x in decisions(a))

        def weight(arch) -> float:
            return math.exp(sum(math.log((elites[x] + 1) / (elite + 2)) - math.log((prior[x] + 1) / (pool_size + 2))
                                for x in decisions(arch)))

        seen = {key(a) for a, _, _ in start}
        cands = [a for a in pool if key(a) not in seen]
        weights = [weight(a) for a in cands]
        draw, drawn, used = random.Random(half), [], set()
        while len(drawn) < n - len(start):
            a = draw.choices(cands, weights=weights)[0]
            if key(a) not in used:
                used.add(key(a))
                drawn.append(a)
        searched = start + [(a, *score(a)) for a in drawn]
        rows.append({"run": run, "start": half, "elite": elite,
                     "search_top1": searched[best(searched)][2], "random_top1": random_all[best(random_all)][2],
                     "search_top10": top10(searched), "random_top10": top10(random_all),
                     "drawn_mean": statistics.mean(c[2] for c in searched[len(start):]),
                     "prior_mean": statistics.mean(c[2] for c in start)})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="finished one-shot run directories")
    p.add_argument("--noise", type=Path, required=True, help="supernet_selection_noise.py's JSON lines for the runs")
    p.add_argument("--elite", type=int, default=50)
    p.add_argument("--pool", type=int, default=20000, help="prior samples the drawn candidates are resampled from")
    p.add_argument("--out", type=Path, required=True, help="JSON lines, one per run and start (appended)")
    args = p.parse_args()
    noise = {r["run"]: r for r in map(json.loads, args.noise.read_text().splitlines())}
    rows = []
    for run in args.runs:
        for row in study(run, noise[str(run)], args.elite, args.pool):
            rows.append(row)
            with args.out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    print(f"\n{len(rows)} searches | test [%] with supernet weights | the search | random search")
    for what in ("top1", "top10"):
        print(f"best-by-validation {what} | {100 * statistics.mean(r[f'search_{what}'] for r in rows):.2f} | "
              f"{100 * statistics.mean(r[f'random_{what}'] for r in rows):.2f}")
    print(f"mean of the drawn candidates {100 * statistics.mean(r['drawn_mean'] for r in rows):.2f}, "
          f"of the prior's {100 * statistics.mean(r['prior_mean'] for r in rows):.2f}")


if __name__ == "__main__":
    main()
