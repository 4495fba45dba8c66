"""Sparse GP: beats the mean predictor on synthetic latent data; metric helpers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnas.core.errors import ConfigError, DataError
from attnas.graphvae.gp import SparseGPSettings, fit_sparse_gp, predictive_performance, rmse_pearson


def _synthetic(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = 0.7 + 0.02 * (torch.sin(2 * x[:, 0]) + x[:, 1] ** 2 - x[:, 2])
    return x, y + 0.002 * torch.randn(n, generator=g)


SMALL = SparseGPSettings(inducing=32, epochs=40, batch_size=200, lr=0.05)


def test_gp_beats_the_mean_predictor():
    x, y = _synthetic(400, 0)
    xt, yt = _synthetic(100, 1)
    gp = fit_sparse_gp(x, y, SMALL)
    mean, var = gp.predict(xt)
    rmse, r = rmse_pearson(mean, yt)
    rmse_mean, _ = rmse_pearson(torch.full_like(yt, float(y.mean())), yt)
    assert rmse < 0.5 * rmse_mean and r > 0.8
    assert torch.all(var > 0)
    std_mean, _ = gp.predict(xt, standardized=True)
    assert torch.allclose(std_mean * gp.y_std + gp.y_mean, mean)


def test_predictive_performance_reports_standardised_rmse():
    x, y = _synthetic(300, 2)
    xt, yt = _synthetic(80, 3)
    out = predictive_performance(x, y, xt, yt, repeats=2, settings=SparseGPSettings(inducing=16, epochs=20, batch_size=150, lr=0.05))
    assert len(out["rmse_runs"]) == 2 and out["rmse"] == pytest.approx(np.mean(out["rmse_runs"]))
    assert out["rmse"] < out["rmse_if_mean"]
    assert out["pearson_r"] > 0.5


def test_rmse_pearson_values():
    rmse, r = rmse_pearson([1.0, 2.0, 3.0], [1.0, 2.0, 5.0])
    assert rmse == pytest.approx(np.sqrt(4 / 3))
    assert r == pytest.approx(np.corrcoef([1, 2, 3], [1, 2, 5])[0, 1])
    with pytest.raises(DataError):
        rmse_pearson([1.0], [1.0])


def test_bad_inputs():
    with pytest.raises(DataError, match="NaN"):
        fit_sparse_gp(torch.tensor([[0.0], [float("nan")]]), torch.tensor([0.0, 1.0]), SMALL)
    with pytest.raises(DataError, match="shape|must be"):
        fit_sparse_gp(torch.zeros(3, 2), torch.zeros(4), SMALL)
    with pytest.raises(ConfigError, match="inducing"):
        SparseGPSettings(inducing=0)


def test_fit_depends_on_its_seed_only_not_on_the_global_generator():
    # GPyTorch initialises the variational mean from the global generator at the first
    # training call; a resumed BO run must refit exactly the same GP.
    x, y = _synthetic(60, 0)
    settings = SparseGPSettings(inducing=8, epochs=3, batch_size=30, lr=0.05, seed=4)
    torch.manual_seed(1)
    a = fit_sparse_gp(x, y, settings)
    torch.manual_seed(2)
    torch.randn(100)
    state = torch.random.get_rng_state()
    b = fit_sparse_gp(x, y, settings)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's stream is untouched
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(p, q)
    c = fit_sparse_gp(x, y, SparseGPSettings(inducing=8, epochs=3, batch_size=30, lr=0.05, seed=5))
    assert not all(torch.equal(p, q) for p, q in zip(a.model.parameters(), c.model.parameters()))


def _dense_inducing_posterior(gp, x, y, xt, method):
    """FITC / SGPR evidence and FITC prediction from dense matrices (the textbook formulas)."""
    m = gp.model
    base, u = m.covar_module.base_kernel, m.covar_module.inducing_points.detach()
    with torch.no_grad():
        kuu = base(u, u).to_dense()
        kuu = kuu + m.covar_module.jitter * kuu.diagonal().mean() * torch.eye(len(u), dtype=torch.float64)
        kuf, kus = base(u, x).to_dense(), base(u, xt).to_dense()
        qff, qsf = kuf.T @ torch.linalg.solve(kuu, kuf), kus.T @ torch.linalg.solve(kuu, kuf)
        gap = base(x, diag=True) - torch.diagonal(qff)  # diag(K_ff - Q_ff)
        noise, c = float(m.likelihood.noise), float(m.mean_module.constant)
        ys = gp.standardize(y)
        cov = qff + noise * torch.eye(len(x), dtype=torch.float64) + (torch.diag(gap) if method == "fitc" else 0)
        evidence = torch.distributions.MultivariateNormal(torch.full((len(x),), c, dtype=torch.float64), cov).log_prob(ys)
        if method == "sgpr":
            evidence = evidence - gap.sum() / (2 * noise)  # Titsias' trace term
        mean = c + qsf @ torch.linalg.solve(cov, ys - c)
        var = base(xt, diag=True) - torch.einsum("ij,ji->i", qsf, torch.linalg.solve(cov, qsf.T)) + noise
    return float(evidence), mean, var


@pytest.mark.parametrize("method", ["fitc", "sgpr"])
def test_fitc_and_sgpr_optimise_their_textbook_evidence(method):
    from gpytorch.mlls import ExactMarginalLogLikelihood

    x, y = (t.double() for t in _synthetic(60, 0))
    xt, _ = _synthetic(7, 1)
    gp = fit_sparse_gp(x, y, SparseGPSettings(inducing=8, method=method, maxiter=30))
    evidence, mean, var = _dense_inducing_posterior(gp, x, y, xt.double(), method)
    m = gp.model
    m.train()
    ours = float(ExactMarginalLogLikelihood(m.likelihood, m)(m(x), gp.standardize(y))) * len(x)
    m.eval()
    assert ours == pytest.approx(evidence, rel=1e-6)
    if method == "fitc":  # FITC's predictive mean and variance Q_*f (Q_ff + Lambda)^-1 y, ...
        got_mean, got_var = gp.predict(xt, standardized=True)
        assert torch.allclose(got_mean, mean, atol=1e-6) and torch.allclose(got_var, var, atol=1e-6)


def test_fitc_predicts_as_well_as_the_variational_gp():
    x, y = _synthetic(400, 0)
    xt, yt = _synthetic(100, 1)
    fitc = fit_sparse_gp(x, y, SparseGPSettings(inducing=32, method="fitc", maxiter=100))
    rmse, r = rmse_pearson(fitc.predict(xt)[0], yt)
    rmse_mean, _ = rmse_pearson(torch.full_like(yt, float(y.mean())), yt)
    assert rmse < 0.5 * rmse_mean and r > 0.8
    with pytest.raises(ConfigError, match="method"):
        SparseGPSettings(method="exact")


def test_fitc_fits_data_with_duplicate_points():
    # BO data repeat points (a proposal decoded twice, unscored points at the worst score):
    # duplicate inducing inputs make K_UU singular, which the relative jitter absorbs
    x, y = _synthetic(4, 0)
    x, y = x.repeat(10, 1), y.repeat(10)
    gp = fit_sparse_gp(x, y, SparseGPSettings(inducing=20, method="fitc", maxiter=30))
    mean, var = gp.predict(x[:4])
    assert torch.allclose(mean.float(), y[:4], atol=5e-3) and bool((var > 0).all())


def test_a_nan_elbo_is_a_training_error_naming_the_step(monkeypatch):
    from gpytorch.mlls import VariationalELBO

    from attnas.core.errors import TrainingError

    original = VariationalELBO.forward
    monkeypatch.setattr(VariationalELBO, "forward", lambda self, *a, **k: original(self, *a, **k) * float("nan"))
    x, y = _synthetic(50, 0)
    with pytest.raises(TrainingError, match=r"^BO surrogate: the training loss became nan at epoch 1, batch 1;"):
        fit_sparse_gp(x, y, SMALL, description="BO surrogate")
