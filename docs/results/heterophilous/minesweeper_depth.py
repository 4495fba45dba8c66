"""What the hetero space lacks on minesweeper: hand-designed points trained with and without
Platonov et al.'s (ICLR 2023) residual blocks, at several depths, widths and dropouts.

Each setting trains one model on one fixed split under the recipe's retraining budget and
records its VALIDATION ROC-AUC (which decides) and its test ROC-AUC (for the record only).
A setting is ``name:recipe:arch:override,override,...`` where ``arch`` is a
``hetero-baseline`` model (``gat_sep``, ``sage``) or ``res:<op>`` (every layer
``add(t-1:<op>, 0:zero)`` of the AutoAttend space).

    ATTNAS_DATA=../shared/data python -m docs.results.heterophilous.minesweeper_depth runs/ms-depth 0 \
        'sage2:autoattend-hetero:sage:' 'res4:autoattend-hetero-deep:res:sage:space.layers=4'
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from attnas.config import load_config
from attnas.data.root import resolve_data_root
from attnas.pipeline import train_final
from attnas.runs.build import build_space, build_task


def evaluate(recipe: str, arch: str, overrides: list[str], split: int) -> dict:
    """Train one setting on ``split`` (seed 100 + split, as compare's seed-0 rows); its scores."""
    base = load_config(recipe, ["task.dataset=minesweeper", *overrides]).to_dict()
    if arch.startswith("res:"):
        op = arch.split(":", 1)[1]
        layers = [{"type": "add", "inputs": [{"source": t - 1, "op": op}, {"source": 0, "op": "zero"}]}
                  for t in range(1, base["space"]["layers"] + 1)]
        choices = {"layers": layers}
    else:
        base["space"] = {"name": "hetero-baseline"}
        choices = {"model": arch}
    config = load_config({**base, "name": "ms-depth", "strategy": {"name": "fixed", "arch": choices}})
    task, space = build_task(config, resolve_data_root(), torch.device("cpu")), build_space(config)
    task.select_split(split)
    start = time.time()
    res = train_final(None, config, space, task, None, space.arch(choices), seed=config.seed + 100 + split)
    return {"val": res.val, "test": res.test, "seconds": time.time() - start}


def main(out: str, split: int, settings: list[str]) -> None:
    torch.set_num_threads(1)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for setting in settings:
        name, recipe, arch_and_sets = setting.split(":", 2)
        if arch_and_sets.startswith("res:"):
            op, _, sets = arch_and_sets[4:].partition(":")
            arch = f"res:{op}"
        else:
            arch, _, sets = arch_and_sets.partition(":")
        f = folder / f"{name}-split{split}.json"
        if not f.exists():
            row = {"setting": setting, **evaluate(recipe, arch, [s for s in sets.split(",") if s], split)}
            f.write_text(json.dumps(row))
        row = json.loads(f.read_text())
        print(f"{name:24s} val {100 * row['val']:.2f}  (test {100 * row['test']:.2f})  {row['seconds']:.0f} s  {setting}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
