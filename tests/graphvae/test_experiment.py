"""The ENAS experiment pipeline end to end on a tiny synthetic ENAS file."""

from __future__ import annotations

import json
import random

import pytest
import torch

from attnas.errors import ConfigError
from attnas.graphvae.bo import BOSettings
from attnas.graphvae.experiment import QUICK, ExperimentSettings, paper_settings, run_enas_experiment
from attnas.graphvae.gp import SparseGPSettings
from attnas.graphvae.vae import GraphVAE
from attnas.graphvae.train import TrainSettings


def _write_enas(root, n, layers=4, seed=0):
    rng = random.Random(seed)
    lines = []
    for _ in range(1000 + n):  # the loader skips the first 1,000 lines, as D-VAE
        rows = [[rng.randrange(6)] + [rng.randrange(2) for _ in range(k)] for k in range(layers)]
        acc = 0.70 + 0.01 * sum(r[0] for r in rows) / layers
        lines.append(f"{rows}, {acc:.4f}\n")
    (root / "enas").mkdir()
    (root / "enas" / "final_structures6.txt").write_text("".join(lines))


def test_tiny_experiment_reports_every_metric(tmp_path):
    _write_enas(tmp_path, 60)
    settings = ExperimentSettings(
        model="GCN-EMB",
        hidden=12,
        latent=4,
        train=TrainSettings(epochs=2, batch_size=16, lr=1e-2),
        recon_graphs=4,
        encode_times=1,
        decode_times=2,
        prior_points=10,
        prior_decodes=2,
        gp=SparseGPSettings(inducing=8, epochs=5, batch_size=32, lr=0.05),
        gp_repeats=1,
        properties=True,
        tsne_points=30,
        bo=BOSettings(iterations=1, batch_size=2, decode_attempts=5, num_restarts=2, raw_samples=16, mc_samples=16,
                      gp=SparseGPSettings(inducing=8, epochs=3, batch_size=32, lr=0.05)),
    )
    metrics = run_enas_experiment(tmp_path, settings, tmp_path / "out")
    for key in ("recon_accuracy", "validity", "uniqueness", "novelty"):
        assert 0.0 <= metrics[key] <= 1.0
    assert metrics["rmse"] > 0 and -1.0 <= metrics["pearson_r"] <= 1.0
    assert "average_path_length_r" in metrics and "clustering_coefficient_r" in metrics
    saved = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert saved["pearson_r"] == pytest.approx(metrics["pearson_r"])
    assert len(json.loads((tmp_path / "out" / "history.json").read_text())) == 2
    assert (tmp_path / "out" / "tsne.png").exists()
    saved_model = torch.load(tmp_path / "out" / "model.pt", weights_only=False)
    GraphVAE.from_arguments(saved_model["model_args"]).load_state_dict(saved_model["model"])
    bo = json.loads((tmp_path / "out" / "bo.json").read_text())
    assert len(bo["proposals"]) == 2
    assert all(p["source"] in ("dataset", "surrogate", "invalid") for p in bo["proposals"])
    assert 0.0 <= metrics["bo_valid_fraction"] <= 1.0


def test_presets_and_validation():
    assert QUICK.model == "DVAE-EMB" and QUICK.train.epochs == 2
    paper = paper_settings("DVAE-EMB")
    assert paper.train.iterations == 4 and paper.train.epochs == 300 and paper.train.lr == 1e-4
    assert paper_settings("GCN-EMB").train.iterations == 1 and paper.gp.inducing == 500 and paper.gp_repeats == 10
    with pytest.raises(ConfigError, match="did you mean 'GCN-EMB'"):
        ExperimentSettings(model="GCN-EMV")
