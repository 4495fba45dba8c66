"""The validation grid of the heterophily baselines: the same small grid for every baseline.

For each baseline of :mod:`attnas.spaces.hetero_baselines` and each point of the grid
(hidden units x dropout; GPR-GNN also its alpha), train on each of the dataset's ten fixed splits under the
``autoattend-hetero`` recipe's training budget and record the mean VALIDATION score; the
point with the best mean validation score is chosen (test scores are written for the
record only, never used to choose). Prints a table and the ``--set`` overrides that put
the chosen settings into ``autoattend-hetero``.

    ATTNAS_DATA=../shared/data python -m docs.results.heterophilous.baseline_grid texas runs/hetero-grid
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from pathlib import Path

import torch

from attnas.config import load_config
from attnas.data.root import resolve_data_root
from attnas.pipeline import train_final
from attnas.runs.build import build_space, build_task
from attnas.spaces.hetero_baselines import MODELS

#: The grid every baseline shares: hidden units x dropout (light, or the paper's own: 0.6 for
#: GAT and GAT-sep, 0.5 for the others); GPR-GNN's alpha (its paper tunes it per dataset) at
#: both ends of that paper's range.
GRID = {"hidden": (32, 64), "dropout": (0.2, "paper")}
EXTRA = {"gprgnn": {"gpr_alpha": (0.1, 0.9)}}


def grid_points(model: str) -> list[dict]:
    """The baseline's options at every grid point (GAT and GAT-sep: dropout is also their coefficient dropout)."""
    axes = {**GRID, **EXTRA.get(model, {})}
    points = []
    for values in itertools.product(*axes.values()):
        p = dict(zip(axes, values))
        gat = model in ("gat", "gat_sep")
        if p["dropout"] == "paper":
            p["dropout"] = 0.6 if gat else 0.5
        if gat:
            p["gat_dropout"] = p["dropout"]
        points.append(p)
    return points


def evaluate(dataset: str, model: str, options: dict, splits: int = 10) -> dict:
    base = load_config("autoattend-hetero", [f"task.dataset={dataset}"]).to_dict()
    recipe = {**base, "name": f"grid-{model}", "space": {"name": "hetero-baseline", **options},
              "strategy": {"name": "fixed", "arch": {"model": model}}}
    config = load_config(recipe)
    task, space = build_task(config, resolve_data_root(), torch.device("cpu")), build_space(config)
    arch = space.arch({"model": model})
    val, test = [], []
    for k in range(splits):
        task.select_split(k)
        res = train_final(None, config, space, task, None, arch, seed=config.seed + 100 + k)
        val.append(res.val)
        test.append(res.test)
    return {"model": model, "options": options, "val_mean": statistics.fmean(val), "test_mean": statistics.fmean(test),
            "val": val, "test": test}


def main(dataset: str, out: str) -> None:
    torch.set_num_threads(1)
    folder = Path(out) / dataset
    folder.mkdir(parents=True, exist_ok=True)
    chosen = {}
    for model in MODELS:
        rows = []
        for options in grid_points(model):
            f = folder / f"{model}-{'-'.join(f'{k}{v}' for k, v in options.items())}.json"
            row = json.loads(f.read_text()) if f.exists() else evaluate(dataset, model, options)
            f.write_text(json.dumps(row))
            rows.append(row)
            print(f"{dataset} {model:8s} {options}: val {100 * row['val_mean']:.1f} (test {100 * row['test_mean']:.1f})",
                  flush=True)
        chosen[model] = max(rows, key=lambda r: r["val_mean"])  # validation decides
    (folder / "chosen.json").write_text(json.dumps({m: r["options"] for m, r in chosen.items()}, indent=1))
    sets = [f"space.options.baselines.{m}.{k}={v}" for m, r in chosen.items() for k, v in r["options"].items()]
    print("--set " + " --set ".join(sets))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "runs/hetero-grid")
