"""Choosing latent BO's settings on validation only (docs/results/nas_bench_graph.md).

Runs ``table-latent-bo``'s loop (:func:`attnas.strategies.table_latent_bo.latent_bo`) with one
VAE under several settings, 100 queries, seeds ``0..S-1``, on the eight datasets other than
proteins, and prints the pooled (per-seed mean over the datasets) gain in **validation**
performance of the pick over random search with the same seed, with regularized evolution's
for scale, and each setting's paired difference to the first one given. The test column is
never read. A control ``candidates-only`` queries uniform
draws among the same acquisition candidates as ``around_best`` (no GP)::

    PYTHONPATH=. python -m docs.results.nas_bench_graph.bo_settings runs/nbg-vae-cora-dvae-emb/vae.pt 20 \\
        'base={}' 'pool=0' 'around_best=5' ...

Each setting is ``name=JSON`` of :func:`latent_bo`'s keyword arguments (``{}``: the defaults);
``control:name=JSON`` runs the control with those candidates.
"""

import json
import random
import sys
import time

import numpy as np
from scipy.stats import ttest_rel

from attnas.bench.runner import space_for
from attnas.strategies.table_latent_bo import acquisition_candidates, latent_bo, space_latents
from attnas.strategies.table_search import random_search, regularized_evolution
from attnas.tasks.nas_bench_graph import NasBenchGraphTask, NasBenchGraphTaskConfig

DATASETS = ("cora", "citeseer", "pubmed", "cs", "physics", "photo", "computers", "arxiv")
BUDGET = 100


def candidates_only(queries, budget, rng, latents, initial=10, batch=10, pool=2000, around_best=0, **_):
    """latent_bo's random start and candidates, but uniform draws among the candidates (no GP)."""
    while queries.spent < min(initial, budget):
        queries.query(queries.sample_unseen(rng))
    unseen = queries.feasible.copy()
    while queries.spent < budget:
        unseen[queries.trace] = False
        candidates = acquisition_candidates(queries, unseen, rng, pool, around_best, batch).tolist()
        for i in rng.sample(candidates, min(batch, budget - queries.spent, len(candidates))):
            queries.query(int(i))


def main(vae_file: str, seeds: int, settings: list[str]) -> None:
    latents = space_latents(vae_file)
    space = space_for("cora")
    loops = {"regularized evolution": lambda q, rng: regularized_evolution(q, BUDGET, rng)}
    for text in settings:
        name, _, kwargs = text.partition("=")
        kwargs = json.loads(kwargs)
        loop = candidates_only if name.startswith("control:") else latent_bo
        loops[name] = lambda q, rng, loop=loop, kwargs=kwargs: loop(q, BUDGET, rng, latents, **kwargs)
    gains = {name: [] for name in loops}
    seconds = dict.fromkeys(loops, 0.0)
    for dataset in DATASETS:
        task = NasBenchGraphTask(NasBenchGraphTaskConfig(dataset))

        def picks(loop):
            out = []
            for seed in range(seeds):
                q = task.validation_view(space.index.codes, space.index.neighbours)
                loop(q, random.Random(seed))
                out.append(max(q.scores))
            return np.asarray(out)

        base = picks(lambda q, rng: random_search(q, BUDGET, rng))
        for name, loop in loops.items():
            t0 = time.process_time()
            gains[name].append(picks(loop) - base)
            seconds[name] += time.process_time() - t0
            print(f"{dataset} {name}: val {100 * gains[name][-1].mean():+.3f}", file=sys.stderr, flush=True)
    first = list(gains)[1] if len(gains) > 1 else None  # the first setting given
    print(f"| setting | pooled val. gain over random search (points, 95 % CI, {seeds} seeds) | "
          f"vs {first} (paired t-test p) | CPU s per search |")
    print("|---|---|---|---:|")
    for name, per_dataset in gains.items():
        pooled = 100 * np.mean(per_dataset, axis=0)
        half = 1.96 * pooled.std(ddof=1) / np.sqrt(len(pooled))
        versus = ""
        if name != first:
            ref = 100 * np.mean(gains[first], axis=0)
            versus = f"{np.mean(pooled - ref):+.2f} (p = {ttest_rel(pooled, ref).pvalue:.2g})"
        print(f"| {name} | {pooled.mean():+.2f} ({pooled.mean() - half:+.2f}..{pooled.mean() + half:+.2f}) | "
              f"{versus} | {seconds[name] / (seeds * len(DATASETS)):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
