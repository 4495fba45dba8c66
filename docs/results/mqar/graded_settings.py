"""How graded are briefly trained hybrids' validation accuracies? (docs/results/mqar.md)

Usage (from the repository root)::

    python -m docs.results.mqar.graded_settings OUT.json EPOCHS [--set KEY=VALUE ...] [--only A/B ...]

Trains each hybrid of :data:`HYBRIDS` (2-layer per-layer hybrids under half softmax's
latency at 1,024 tokens in earlier runs, solvers and non-solvers alike) and ``softmax`` in
both layers from scratch with the candidate training of ``hybrid-mqar-hard-evolution``
(AdamW, lr 0.001, weight decay 0.01, batch 32, constant learning rate, seed 1000: the
first candidate's) for ``EPOCHS`` epochs, the recipe changed by the ``--set`` overrides, and
records the validation accuracy after every epoch (with a constant learning rate and no
early stopping, epoch ``e`` of this run is a candidate trained ``e`` epochs), the best so far
and the seconds per epoch. Validation only: the test split is not scored. Writes ``OUT.json``
after every model (a killed run keeps what it finished; a rerun skips the models in it).
``--only A/B`` trains just that hybrid (e.g. ``--only softmax/softmax``).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from attnas.config import load_config
from attnas.core.arch import Arch
from attnas.runs.build import build_space, build_task
from attnas.runs.rng import seed_everything
from attnas.training.train import fit

HYBRIDS = (("softmax", "softmax"), ("linformer", "local"), ("sparse", "linear"), ("linear", "linear"),
           ("performer", "bigbird"), ("linear", "sparse"), ("sparse", "performer"), ("linear", "longformer"),
           ("bigbird", "linformer"), ("performer", "performer"), ("sparse", "sparse"), ("linformer", "linear"))
SEED = 1000


def main(out: str, epochs: int, overrides: list[str], only: list[str] | None = None) -> None:
    torch.set_num_threads(1)
    config = load_config("hybrid-mqar-hard-evolution", overrides)
    space = build_space(config)
    task = build_task(config, Path(__import__("os").environ.get("ATTNAS_DATA", "data")), torch.device("cpu"))
    cfg = replace(config.strategy.options.train, epochs=epochs, patience=0)
    path = Path(out)
    done = json.loads(path.read_text()) if path.exists() else {"overrides": overrides, "epochs": epochs, "models": {}}
    for layers in [tuple(o.split("/")) for o in only] if only else HYBRIDS:
        name = " / ".join(layers)
        if name in done["models"]:
            continue
        seed_everything(SEED)
        model = space.build(Arch(space.name, {"mechanism": list(layers)}), task)
        start = time.perf_counter()
        res = fit(model, task, cfg, seed=SEED, desc=name, score_test=False)
        vals = [h["val"] for h in res.history]
        done["models"][name] = {"val": vals, "seconds_per_epoch": (time.perf_counter() - start) / epochs}
        path.write_text(json.dumps(done, indent=1))
        print(name, " ".join(f"{v:.3f}" for v in vals), f"{done['models'][name]['seconds_per_epoch']:.0f} s/epoch",
              flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    only = [args[i + 1] for i, a in enumerate(args) if a == "--only"]
    main(args[0], int(args[1]), sets, only)
