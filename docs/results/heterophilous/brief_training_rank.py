"""How well does a brief training rank architectures of the ``hetero`` space the way a full
training does? VALIDATION accuracy only (the test nodes are never scored).

The first ``n`` distinct prior architectures of a search with seed 0 (the population a
trained-candidate search starts from, :meth:`attnas.strategies.trained_candidates.
TrainedCandidateSearch.prior_candidates`) are each trained once under the recipe's
retraining budget, candidate ``i`` with seed ``1000 + i`` as ``evolution-trained`` /
``random-trained`` train it, on fixed split ``split``. Training is full-batch and
deterministic and the learning rate is constant, so the best validation accuracy within the
first ``E`` epochs of that training is exactly what a candidate trained for ``E`` epochs
(``patience: 0``) scores; one training per architecture gives the brief score at every
``E`` (and, with early stopping after ``p`` epochs without a better one, at every ``E/p``)
and the full score (the best epoch of the retraining budget). Printed per setting: the
Spearman and Kendall rank correlations of brief against full validation accuracy (the same
training, so they share its first epochs) and Spearman against the second full training
below (independent of the brief one), the spread
(std, range) of the brief scores, and the seconds per epoch; beside them, the same correlation
between the full training and a second full training with other seeds (``2000 + i``), the
agreement a full training reaches with itself.

    ATTNAS_DATA=../shared/data python -m docs.results.heterophilous.brief_training_rank \
        runs/brief-rank chameleon_filtered 0 20 20,50,100,200/20,200/50
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from scipy import stats

from attnas.config import load_config
from attnas.data.root import resolve_data_root
from attnas.runs.build import build_space, build_task
from attnas.runs.rng import seed_everything
from attnas.strategies.trained_candidates import SEED_OFFSET
from attnas.training.train import fit

RECIPE = "autoattend-hetero-chameleon"
#: Seeds of the second full training of each architecture (how well full training agrees with itself).
REPEAT_OFFSET = 2000


def train_candidates(folder: Path, dataset: str, split: int, n: int, seed_base: int) -> list[dict]:
    """Train the first ``n`` prior architectures on ``split``, candidate ``i`` with seed
    ``seed_base + i`` (resumable: one JSON file each)."""
    config = load_config(RECIPE, [f"task.dataset={dataset}"])
    task, space = build_task(config, resolve_data_root(), torch.device("cpu")), build_space(config)
    task.select_split(split)
    archs = space.sample_distinct(n, random.Random(0))
    rows = []
    for i, arch in enumerate(archs):
        f = folder / f"{dataset}-split{split}-seed{seed_base + i}.json"
        if not f.exists():
            seed_everything(seed_base + i)
            model = space.build(arch, task)
            start = time.time()
            res = fit(model, task, config.retrain, seed=seed_base + i, desc=f"candidate {i}", score_test=False)
            f.write_text(json.dumps({"arch": arch.choices, "val": res.val, "epochs": res.epochs,
                                     "seconds": time.time() - start, "history": [h["val"] for h in res.history]}))
        rows.append(json.loads(f.read_text()))
    return rows


def brief(row: dict, epochs: int, patience: int = 0) -> tuple[float, int]:
    """The best validation accuracy of a training of at most ``epochs`` epochs that stops
    after ``patience`` epochs without a better one (0: never), and the epochs it runs (as
    :func:`attnas.training.train.fit` stops)."""
    best, best_epoch = -1.0, 0
    for epoch, val in enumerate(row["history"][:epochs], start=1):
        if val > best:
            best, best_epoch = val, epoch
        if patience and epoch - best_epoch >= patience:
            return best, epoch
    return best, min(epochs, len(row["history"]))


def main(out: str, dataset: str, split: int, n: int, settings: list[str]) -> None:
    torch.set_num_threads(1)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    rows = train_candidates(folder, dataset, split, n, SEED_OFFSET)
    full = [r["val"] for r in rows]
    again = [r["val"] for r in train_candidates(folder, dataset, split, n, REPEAT_OFFSET)]
    per_epoch = sum(r["seconds"] for r in rows) / sum(r["epochs"] for r in rows)
    print(f"{dataset} split {split}: {n} architectures, full training val {100 * min(full):.1f}-"
          f"{100 * max(full):.1f} (std {100 * statistics.stdev(full):.2f}), {per_epoch * 1000:.1f} ms per epoch")
    print(f"full training against a second full training (seeds {REPEAT_OFFSET} + i): Spearman "
          f"{stats.spearmanr(again, full)[0]:.2f}, Kendall {stats.kendalltau(again, full)[0]:.2f}")
    print("| epochs / patience | mean epochs run | Spearman | Kendall | Spearman, other seed | val std | val range "
          "| best-by-brief's full val |")
    print("|---|---|---|---|---|---|---|---|")
    for setting in settings:
        e, _, p = setting.partition("/")
        runs = [brief(r, int(e), int(p or 0)) for r in rows]
        b = [v for v, _ in runs]
        rho, tau, rho2 = stats.spearmanr(b, full)[0], stats.kendalltau(b, full)[0], stats.spearmanr(b, again)[0]
        pick = max(range(n), key=lambda j: b[j])
        print(f"| {setting} | {statistics.mean(k for _, k in runs):.0f} | {rho:.2f} | {tau:.2f} | {rho2:.2f} | {100 * statistics.stdev(b):.2f} | {100 * min(b):.1f}-{100 * max(b):.1f} "
              f"| {100 * full[pick]:.1f} (best {100 * max(full):.1f}) |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(","))
