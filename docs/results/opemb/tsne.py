"""t-SNE of trained graph VAEs' latent spaces side by side (Chatzianastasis et al., 2021, Figs. 9-10).

Reads the ``vae.pt`` of finished ``graph-vae`` runs on ENAS and plots the latent means of
the first ``--points`` training architectures, coloured by weight-sharing accuracy::

    PYTHONPATH=. python -m docs.results.opemb.tsne RUN_DIR [RUN_DIR ...] --out docs/figures/opemb_tsne_6ep.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch


def main() -> None:
    from attnas.runs.checkpoint_files import load_checkpoint_file
    from attnas.data.enas import load_enas6
    from attnas.graphvae.analysis import tsne_embedding
    from attnas.graphvae.vae import GraphVAE

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    torch.set_num_threads(1)
    train = load_enas6(args.data_dir).train
    graphs = train.graphs.index(list(range(args.points)))
    y = train.y[: args.points].numpy()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.runs), figsize=(5.5 * len(args.runs), 5), squeeze=False)
    order = np.argsort(y)
    for ax, run in zip(axes[0], args.runs):
        saved = load_checkpoint_file(run / "vae.pt")
        model = GraphVAE.from_arguments(saved["model_args"])
        model.load_state_dict(saved["model"])
        model.eval()
        xy = tsne_embedding(model.latent_means(graphs), seed=0)
        sc = ax.scatter(xy[order, 0], xy[order, 1], c=y[order], s=4, cmap="viridis")
        m = json.loads((run / "metrics.json").read_text())
        ax.set_title(f"{m['vae_model']}, {m['vae_epochs']} epochs (GP r = {m['pearson_r']:.3f})")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(sc, ax=axes[0].tolist(), label="weight-sharing accuracy")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
