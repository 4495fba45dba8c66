"""Figures of docs/results/fullattn.md: CAR reconstructions and searched architectures (Fig. 5 style).

Usage::

    PYTHONPATH=. python -m docs.results.fullattn.figure reconstructions RUN_DIR OUT.png
    PYTHONPATH=. python -m docs.results.fullattn.figure architecture OUT.png RUN_DIR [RUN_DIR ...]

``reconstructions`` rebuilds the context auto-regression encoder-decoder of a finished
``car-darts`` run from its ``pretext`` checkpoint, hides random rectangles of eight test
images (seeded masks, the training recipe) and shows input, masked input and reconstruction.
``architecture`` draws each run's ``arch.json`` as its five stages of three blocks, as in
Fig. 5 of Zhou et al. (2021).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from attnas.config import config_from_dict  # noqa: E402
from attnas.data.root import resolve_data_root  # noqa: E402
from attnas.models.car_decoder import ContextAutoregressionModel  # noqa: E402
from attnas.ops.fullattn.self_attention_block import PAPER_LABELS  # noqa: E402
from attnas.pipeline import build_space, build_task  # noqa: E402
from attnas.runs.run_dir import RunDir  # noqa: E402
from attnas.tasks._context_autoregression import context_masks, mask_images  # noqa: E402

COLOURS = {"3": "#9ecae1", "5": "#4292c6", "7": "#08519c", "non": "#e6550d"}


def reconstructions(run_dir: str, out: str, n: int = 8) -> None:
    run = RunDir.open(run_dir)
    config = config_from_dict(run.read_config_yaml())
    space = build_space(config)
    task = build_task(config, resolve_data_root(None), torch.device("cpu"))
    relaxed = space.relaxed(task)
    model = ContextAutoregressionModel(relaxed, task.info.in_dim)
    ck = run.load_checkpoint("pretext")
    model.load_state_dict(ck["state"]["model"])
    model.eval()
    images = next(iter(task.batches("test", shuffle=False, batch_size=n)))[0]
    s = config.strategy.options
    mask = context_masks(len(images), *images.shape[-2:], generator=torch.Generator().manual_seed(0),
                         max_fraction=s.mask_fraction, max_boxes=s.mask_boxes)
    masked = mask_images(images, mask)
    with torch.no_grad():
        recon = model(masked)
    filled = torch.where(mask, recon, images)
    rows = [("input", images), ("masked", masked), ("reconstruction", recon), ("masked pixels filled in", filled)]
    fig, axes = plt.subplots(len(rows), n, figsize=(1.3 * n, 1.4 * len(rows)))
    lo, hi = images.min().item(), images.max().item()
    for r, (name, x) in enumerate(rows):
        for c in range(n):
            ax = axes[r, c]
            img = x[c]
            ax.imshow(img[0] if img.shape[0] == 1 else img.permute(1, 2, 0).clamp(lo, hi), cmap="gray",
                      vmin=lo, vmax=hi)
            ax.set_xticks([]), ax.set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=8)
    fig.suptitle(f"context auto-regression after {ck['step']} search epochs ({config.name})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def _colour(op: str) -> str:
    return COLOURS["non"] if op == "non_local_sa" else COLOURS[op.split("_k")[1][0]]


def _title(run_dir: str) -> str:
    config = config_from_dict(RunDir.open(run_dir).read_config_yaml())
    s, sp = config.strategy.options, config.space.options
    parts = [config.name, f"seed {config.seed}"]
    if config.strategy.name == "car-darts":
        parts.append("with CAR" if s.car else "without CAR")
    parts.append("shared stages 1,3,5 / 2,4" if sp.shared_stages else "stage-wise")
    return f"{Path(run_dir).name}: " + ", ".join(parts)


def architecture(out: str, runs: list[str]) -> None:
    fig, axes = plt.subplots(len(runs), 1, figsize=(14, 1.9 * len(runs)), squeeze=False)
    for ax, run_dir in zip(axes[:, 0], runs):
        arch = json.loads((Path(run_dir) / "arch.json").read_text())
        ops = arch["choices"]["layers"]
        x = 0.0
        boxes = [("stem", ["local_sa_k3_h8"])] + [(f"stage {s + 1}", ops[3 * s:3 * s + 3]) for s in range(5)]
        for name, group in boxes:
            x0 = x
            for op in group:
                ax.add_patch(FancyBboxPatch((x, 0.2), 1.0, 0.6, boxstyle="round,pad=0.02", fc=_colour(op), ec="k"))
                ax.text(x + 0.5, 0.5, PAPER_LABELS[op].replace(" ", "\n", 1), ha="center", va="center", fontsize=7,
                        color="white" if op in ("non_local_sa",) or "_k7" in op or "_k5" in op else "black")
                x += 1.15
            ax.text((x0 + x - 0.15) / 2, 0.95, name, ha="center", fontsize=8)
            ax.plot([x0 - 0.05, x - 0.1], [0.1, 0.1], color="gray", lw=1)
            x += 0.35
        ax.set_xlim(-0.2, x)
        ax.set_ylim(0, 1.1)
        ax.axis("off")
        ax.set_title(_title(run_dir), fontsize=9, loc="left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "reconstructions":
        reconstructions(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "architecture":
        architecture(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
