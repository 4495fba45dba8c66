"""The AutoLA results table (like the paper's Tables 1 and 6) from finished run directories.

Expects one run directory per recipe, named after it, under ``--runs`` (as made by
``attnas search autola-<dataset><variant> --out RUNS/autola-<dataset><variant> ...``), and
prints a Markdown table: test accuracy, parameters and multiply-accumulates (the paper's
"FLOPS" column counts multiply-adds) of one image, plus the search time of the searched row.
When ``attnas retrain RUN --seeds N`` was run too, the mean and standard deviation over the
run's own seed and those ``N`` retraining seeds are added. ``--backbone`` makes the table of a
transfer (the same recipes trained with ``--set space.backbone=resnet32``; the searched row's
run directory holds the cell searched on ResNet-20, see ``docs/results/autola/fashionmnist_cpu.sh``).

    PYTHONPATH=. python -m docs.results.autola.table --runs runs/fm --dataset fashionmnist
    PYTHONPATH=. python -m docs.results.autola.table --runs runs/fm-resnet32 --backbone resnet32
    PYTHONPATH=. python -m docs.results.autola.table --dataset cifar10      # complexity only, no runs
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

import torch

from attnas import registry
from attnas.config import load_config
from attnas.core.arch import load_arch
from attnas.models.complexity import count_macs, count_parameters
from attnas.tasks.base import TaskInfo

ROWS = [("-plain", ""), ("-se", " + SE"), ("-cbam", " + CBAM"), ("-hog-se", " + HOG_SE (K=4)"),
        ("-hog-cbam", " + HOG_CBAM (K=4)"), ("-random", " + random HOGA (K=4)"),
        ("", " + searched HOGA (AutoLA, K=4)")]
#: AutoLA's CIFAR-10 test accuracy (%) of each row: Table 1 and Table 6 (K=4 cells).
PAPER_CIFAR10 = {
    "resnet20": {"-plain": 91.95, "-se": 92.30, "-cbam": 92.81, "-hog-se": 92.87, "-hog-cbam": 93.07,
                 "-random": 93.28, "": 93.38},
    "resnet32": {"-plain": 92.55, "-se": 93.16, "-cbam": 93.47, "-hog-se": 93.62, "-hog-cbam": 93.72,
                 "-random": 94.15, "": 94.33},
    "resnet56": {"-plain": 93.03, "-se": 94.02, "-cbam": 94.10, "": 94.78},
}
SHAPES = {"cifar10": (3, 32, 32), "fashionmnist": (1, 28, 28)}


class _Task:
    def __init__(self, channels: int):
        self.info = TaskInfo(kind="image", in_dim=channels, num_classes=10)


def main() -> None:
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", choices=sorted(SHAPES), default="fashionmnist")
    p.add_argument("--runs", type=Path, default=None, help="folder holding one run directory per recipe")
    p.add_argument("--backbone", default="resnet20", help="the backbone the rows were trained in (transfer)")
    p.add_argument("--only-runs", action="store_true", help="leave out the rows that have no run directory")
    args = p.parse_args()
    backbone = "ResNet-" + args.backbone.removeprefix("resnet")
    shape = SHAPES[args.dataset]
    task = _Task(shape[0])
    example = torch.zeros(1, *shape)
    print(f"| model | test acc. (%), first seed | mean +- std over seeds (%) | paper, CIFAR-10 (%) | params (M) "
          f"| MACs (M), one {shape[1]}x{shape[2]} image | notes |")
    print("|---|---|---|---|---|---|---|")
    for suffix, what in ROWS:
        label = backbone + what
        recipe = f"autola-{args.dataset}{suffix}"
        cfg = load_config(recipe, [f"space.backbone={args.backbone}"])
        space = registry.get("space", cfg.space.name)(cfg.space.options)
        run = args.runs / recipe if args.runs else None
        if args.only_runs and (run is None or not (run / "metrics.json").exists()):
            continue
        acc, spread, note = "", "", ""
        if run is not None and (run / "metrics.json").exists():
            metrics = json.loads((run / "metrics.json").read_text())
            acc = f"{100 * metrics['test_accuracy']:.2f}"
            own = load_config(run / "config.yaml").task.get("dataset") or "same"  # retrain/<dataset>/scratch
            seeds = [metrics["test_accuracy"]] + [
                json.loads(f.read_text())["test_accuracy"]
                for f in sorted((run / "retrain" / str(own) / "scratch").glob("seed-*.json"))]
            if len(seeds) > 1:
                spread = f"{100 * statistics.fmean(seeds):.2f} +- {100 * statistics.stdev(seeds):.2f} (n={len(seeds)})"
            if "search_seconds" in metrics:
                note = f"search {metrics['search_seconds'] / 60:.1f} min"
        if run is not None and (run / "arch.json").exists():
            arch = load_arch(run / "arch.json", space)
        elif cfg.strategy.name == "fixed":
            arch = space.arch(dict(cfg.strategy.options.arch))
        else:  # the searched row without a run: a cell of the same shape, for its size only
            arch = space.sample(random.Random(0))
            note = "(no run: a random cell's size)"
        model = space.build(arch, task)
        params, macs = count_parameters(model), count_macs(model, example)
        paper = PAPER_CIFAR10.get(args.backbone, {}).get(suffix)
        paper = "" if paper is None else f"{paper:.2f}"
        print(f"| {label} | {acc} | {spread} | {paper} | {params / 1e6:.3f} | {macs / 1e6:.1f} | {note} |")


if __name__ == "__main__":
    main()
