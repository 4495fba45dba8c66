"""A tiny synthetic ENAS table and a seconds-long ``graph-vae`` recipe over it.

Shared by the ``graph-vae`` tests. Not a test module: imported as ``from enas_table import
RECIPE, write_enas`` (pytest puts this folder on ``sys.path`` for its test modules).
"""

from __future__ import annotations

import random

#: ``graph-vae`` on 4-layer ENAS cells: every stage (VAE, Tables 1-2, properties, t-SNE, BO) at toy sizes.
RECIPE = {
    "name": "tiny-opemb",
    "seed": 0,
    "task": {"name": "architecture-performance", "dataset": "enas6"},
    "space": {"name": "enas", "layers": 4},
    "strategy": {
        "name": "graph-vae", "model": "gcn-emb", "hidden": 12, "latent": 4, "epochs": 2, "batch_size": 16,
        "lr": 0.01, "checkpoint_every": 1,
        "table1": {"recon_graphs": 4, "encode_times": 1, "decode_times": 2, "prior_points": 10, "prior_decodes": 2},
        "gp": {"inducing": 8, "epochs": 5, "batch_size": 32, "lr": 0.05}, "gp_repeats": 2,
        "properties": True, "tsne_points": 30,
        "bo": {"iterations": 2, "batch_size": 3, "decode_attempts": 5, "num_restarts": 2, "raw_samples": 16,
               "mc_samples": 16, "maxiter": 10, "gp": {"inducing": 8, "epochs": 3, "batch_size": 32, "lr": 0.05}},
    },
}


def write_enas(root, n, layers=4, seed=0):
    """Write ``n`` random scored ENAS cells as ``root/enas/final_structures6.txt`` (D-VAE's format)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(1000 + n):  # the loader skips the first 1,000 lines, as D-VAE
        rows = [[rng.randrange(6)] + [rng.randrange(2) for _ in range(k)] for k in range(layers)]
        lines.append(f"{rows}, {0.70 + 0.01 * sum(r[0] for r in rows) / layers:.4f}\n")
    (root / "enas").mkdir(parents=True)
    (root / "enas" / "final_structures6.txt").write_text("".join(lines))
