"""Paper 004's ENAS experiment end to end: train a graph VAE, then every metric.

:func:`run_enas_experiment` trains one of paper 004's models (:data:`~attnas.graphvae.vae.PAPER_MODELS`)
on the ENAS 6-layer dataset and measures Table 1 (reconstruction accuracy, validity,
uniqueness), Table 2 (sparse-GP RMSE and Pearson's r on the test split), optionally the
graph-property correlations (Sec. 4.4), the t-SNE figure (Sec. 4.5) and latent BO
(Sec. 4.3). :data:`PAPER` holds the paper's protocol and :data:`QUICK` a run of a few
minutes on two CPU cores (a smaller model trained for two epochs, subsampled metrics);
every metric is a fraction in [0, 1] except the RMSE, which is in standardised units as
in the paper's Table 2.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from attnas.errors import ConfigError
from attnas.graphvae.bo import BOSettings, latent_bo
from attnas.graphvae.gp import SparseGPSettings, predictive_performance
from attnas.graphvae.metrics import Table1Settings, table1
from attnas.graphvae.train import TrainSettings, TrainState, fit, new_state
from attnas.graphvae.vae import PAPER_MODELS, paper_model


@dataclass(frozen=True)
class ExperimentSettings:
    """What to train and measure.

    Attributes:
        model: One of paper 004's models: ``D-VAE``, ``DVAE-EMB``, ``GCN``, ``GCN-EMB``.
        hidden: Hidden size (paper: 501).
        latent: Latent size (paper: 56).
        train: Optimisation settings (paper: 300 epochs, batch 32, lr 1e-4; T=4 for DVAE-EMB).
        recon_graphs: Test graphs used for reconstruction accuracy (None: all 1,902).
        encode_times: Encodings per test graph (D-VAE: 10).
        decode_times: Decodings per encoding (D-VAE: 10).
        prior_points: Prior points for validity/uniqueness (D-VAE: 1,000).
        prior_decodes: Decodings per prior point (D-VAE: 10).
        gp: Sparse-GP settings (paper: 500 inducing points).
        gp_repeats: Sparse-GP repetitions (paper: 10).
        properties: Also compute the graph-property correlations (Sec. 4.4).
        tsne_points: Points in the t-SNE figure (0: no figure; None: all).
        bo: Latent BO settings (Sec. 4.3; None: no BO). Decoded architectures are scored
            from the dataset when it holds them and by a sparse GP on all latent means
            otherwise, each answer labelled ``dataset`` or ``surrogate``.
        seed: Seed of the metrics' random draws.
    """

    model: str = "D-VAE"
    hidden: int = 501
    latent: int = 56
    train: TrainSettings = field(default_factory=TrainSettings)
    recon_graphs: int | None = None
    encode_times: int = 10
    decode_times: int = 10
    prior_points: int = 1000
    prior_decodes: int = 10
    gp: SparseGPSettings = field(default_factory=SparseGPSettings)
    gp_repeats: int = 10
    properties: bool = True
    tsne_points: int | None = None
    bo: BOSettings | None = None
    seed: int = 0

    @property
    def table1(self) -> Table1Settings:
        """The Table 1 sample sizes."""
        return Table1Settings(self.recon_graphs, self.encode_times, self.decode_times, self.prior_points,
                              self.prior_decodes)

    def __post_init__(self) -> None:
        if self.model not in PAPER_MODELS:
            from attnas.errors import unknown_name

            raise ConfigError(unknown_name("graph VAE model", self.model, PAPER_MODELS))


#: Paper 004's protocol for D-VAE (see :func:`paper_settings` for every model).
PAPER = ExperimentSettings(bo=BOSettings())


def paper_settings(model: str) -> ExperimentSettings:
    """Paper 004's protocol for ``model``: 300 epochs, batch 32, lr 1e-4, every metric, and
    ``T = 4`` training iterations for DVAE-EMB (Appendix B; 1 for the others)."""
    iterations = 4 if model == "DVAE-EMB" else 1
    return replace(PAPER, model=model, train=replace(PAPER.train, iterations=iterations))

#: A few minutes on two CPU cores: DVAE-EMB with hidden size 64, two epochs at lr 1e-3,
#: 200 test graphs x 10 decodings, 200 prior points x 10 decodings, one sparse GP with
#: 256 inducing points trained for 5 passes.
QUICK = ExperimentSettings(
    model="DVAE-EMB",
    hidden=64,
    train=TrainSettings(epochs=2, lr=1e-3),
    recon_graphs=200,
    encode_times=1,
    decode_times=10,
    prior_points=200,
    prior_decodes=10,
    gp=SparseGPSettings(inducing=256, epochs=5),
    gp_repeats=1,
    properties=False,
    tsne_points=0,
)


def run_enas_experiment(
    data_dir: str | os.PathLike | None = None,
    settings: ExperimentSettings = QUICK,
    out_dir: str | os.PathLike | None = None,
    state: TrainState | None = None,
) -> dict:
    """Train on ENAS and measure paper 004's metrics.

    Args:
        data_dir: Data root holding ``enas/final_structures6.txt``.
        settings: What to train and measure.
        out_dir: When given, ``metrics.json``, ``history.json``, ``model.pt`` (rebuild with
            ``GraphVAE.from_arguments(d["model_args"])``, then load ``d["model"]``),
            ``tsne.png`` and ``bo.json`` go here.
        state: A (resumed) training state to continue instead of a fresh one.

    Returns:
        The flat metrics: ``recon_accuracy``, ``validity``, ``uniqueness``, ``novelty``,
        ``rmse``, ``pearson_r`` (+ their standard deviations), timings in seconds and,
        when asked, ``average_path_length_r`` and ``clustering_coefficient_r``.
    """
    from attnas.data.enas import load_enas6

    t0 = time.perf_counter()
    data = load_enas6(data_dir)
    config = paper_model(settings.model, hidden=settings.hidden, latent=settings.latent)
    if state is None:
        state = new_state(config, data.train.num_types, data.train.max_nodes, settings.train)
    t_train = time.perf_counter()
    state = fit(state, data.train, description=f"train {settings.model}")
    train_seconds = time.perf_counter() - t_train
    model = state.model
    model.eval()
    metrics: dict = {"model": settings.model, "train_seconds": train_seconds}

    t = time.perf_counter()
    z_train = model.latent_means(data.train.graphs)
    z_test = model.latent_means(data.test.graphs)
    metrics.update(table1(model, data.train.graphs, data.test.graphs, settings.table1, seed=settings.seed,
                          z_train=z_train))
    metrics["table1_seconds"] = time.perf_counter() - t

    t = time.perf_counter()
    perf = predictive_performance(z_train, data.train.y, z_test, data.test.y, settings.gp_repeats, settings.gp)
    metrics.update({k: v for k, v in perf.items() if not k.endswith("_runs")})
    metrics["table2_seconds"] = time.perf_counter() - t

    if settings.properties:
        from attnas.graphvae.analysis import property_correlations

        everything = data.all
        metrics.update(property_correlations(everything.graphs, everything.y))
    if settings.bo is not None:
        metrics.update(_run_bo(model, data, z_train, z_test, settings, out_dir))
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if settings.tsne_points != 0:
            from attnas.graphvae.analysis import plot_tsne

            k = len(z_train) if settings.tsne_points is None else min(settings.tsne_points, len(z_train))
            plot_tsne(z_train[:k], data.train.y[:k], out / "tsne.png", title=f"{settings.model} latent space")
        (out / "history.json").write_text(json.dumps(state.history, indent=1))
        torch.save({"model_args": model.arguments(), "model": model.state_dict()}, out / "model.pt")
    metrics["total_seconds"] = time.perf_counter() - t0
    metrics["settings"] = asdict(settings)
    if out_dir is not None:
        (Path(out_dir) / "metrics.json").write_text(json.dumps(metrics, indent=1))
    return metrics


def _run_bo(model, data, z_train: torch.Tensor, z_test: torch.Tensor, settings: ExperimentSettings, out_dir) -> dict:
    """Sec. 4.3: batch-EI BO from the training latents; scores from the dataset or the GP surrogate."""
    from attnas.graphvae.evaluator import SurrogateEvaluator, TableEvaluator
    from attnas.graphvae.gp import fit_sparse_gp
    from attnas.graphvae.validity import is_valid_enas

    t = time.perf_counter()
    everything = data.all
    surrogate = fit_sparse_gp(torch.cat([z_train, z_test]), everything.y, settings.bo.gp, description="surrogate GP")
    evaluator = TableEvaluator.from_dataset(everything, SurrogateEvaluator(model, surrogate))
    n = data.train.max_nodes
    result = latent_bo(model, z_train, data.train.y, evaluator, lambda b: is_valid_enas(b, n_nodes=n), settings.bo)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "bo.json").write_text(json.dumps(result.to_dict(), indent=1))
    props = result.proposals
    valid = [p for p in props if p.source != "invalid"]
    return {
        "bo_best_value": None if result.best is None else result.best.value,
        "bo_best_source": None if result.best is None else result.best.source,
        "bo_valid_fraction": len(valid) / max(len(props), 1),
        "bo_dataset_fraction": sum(p.source == "dataset" for p in valid) / max(len(valid), 1),
        "bo_mean_value": sum(p.value for p in valid) / max(len(valid), 1),
        "bo_seconds": time.perf_counter() - t,
    }
