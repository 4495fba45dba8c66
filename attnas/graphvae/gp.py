"""A sparse Gaussian process on latent means: Chatzianastasis et al.'s (2021) Table 2 and the BO surrogate.

Chatzianastasis et al., 2021, Sec. 4.2, following D-VAE (Zhang et al. 2019, Sec. 4.2): a sparse GP with 500
inducing points is trained on the latent means of the training architectures to predict
their weight-sharing accuracy; the test split's RMSE and Pearson's r are reported as
mean and standard deviation over 10 repetitions. As in D-VAE's ``bo.py`` the targets are
standardised with the training mean and standard deviation, and the RMSE is measured in
those standardised units (the scale of the paper's 0.384).

D-VAE's sparse GP is a Theano FITC-style model trained by Adam on minibatches of 1,000
points for 100 passes. Here it is GPyTorch's stochastic variational GP (an
``ApproximateGP`` with a learned whitened variational distribution over 500 inducing
points, Hensman et al. 2013) wrapped by BoTorch's ``SingleTaskVariationalGP`` so the same
object serves expected-improvement acquisition; it is trained by Adam on the variational
ELBO with the same minibatch size and number of passes. Kernel: a scaled ARD RBF kernel
whose length scales start at the median pairwise distance of the inputs; inducing points
start at a random subset of the training inputs. The repetitions differ in that subset
and in the minibatch order.

``SparseGPConfig.method`` chooses the approximation (so that a gap to the
paper's Table 2 can be blamed on the right part), all on the same latents, kernel,
initialisation and inducing-point subset:

- ``"svgp"`` (default): the stochastic variational GP above (Hensman et al. 2013).
- ``"fitc"``: FITC (Snelson & Ghahramani 2006; Quinonero-Candela & Rasmussen 2005), the
  approximation of D-VAE's Theano sparse GP. With inducing inputs ``U``,
  ``Q_ab = K_aU K_UU^{-1} K_Ub``, FITC is the exact GP whose kernel is::

      k_FITC(x, x') = Q(x, x') + delta(x, x') (k(x, x) - Q(x, x))

  so its evidence is ``log N(y | 0, Q_ff + diag(K_ff - Q_ff) + sigma^2 I)`` and its
  predictive mean ``Q_*f (Q_ff + Lambda)^{-1} y`` with ``Lambda = diag(K_ff - Q_ff) +
  sigma^2 I``. It is GPyTorch's ``InducingPointKernel`` with the diagonal correction that
  the library applies at prediction also applied in training, and without SGPR's trace
  term (:class:`FITCKernel`).
- ``"sgpr"``: GPyTorch's ``InducingPointKernel`` as it is (Titsias 2009): the evidence
  ``log N(y | 0, Q_ff + sigma^2 I) - tr(K_ff - Q_ff) / (2 sigma^2)``.

``fitc`` and ``sgpr`` are exact-GP objectives on all points at once (Woodbury identities,
``O(n m^2)``) and are fitted by BoTorch's ``fit_gpytorch_mll_scipy`` (L-BFGS-B, at most
``maxiter`` iterations, no random restarts), hyperparameters and inducing inputs together.
``K_UU`` gets a jitter of ``1e-6 * mean(diag K_UU)`` (1e-4, then 1e-2 if its Cholesky factor
still fails: BO data hold near-duplicate points). With at least as many inducing points
as data, ``fitc`` is the exact GP (``Q_ff = K_ff``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from attnas.config import CheckedConfig, PositiveFloat, PositiveInt, Seed
from attnas.core.errors import ConfigError, DataError, check_finite_loss
from attnas.reporting.progress import progress


@dataclass(frozen=True)
class SparseGPConfig(CheckedConfig):
    """Sparse-GP training settings.

    Attributes:
        inducing: Number of inducing points (paper: 500).
        epochs: Passes over the training data (D-VAE: 100).
        batch_size: Minibatch size (D-VAE: 1,000, twice the inducing points).
        lr: Adam learning rate (D-VAE's Theano model: 5e-4; GPyTorch's variational
            parameters need a larger step, default 0.01).
        seed: Seed of the inducing-point subset and the minibatch order.
        method: ``"svgp"`` (stochastic variational GP, default), ``"fitc"`` or ``"sgpr"``
            (module doc); ``epochs``, ``batch_size`` and ``lr`` apply to ``svgp`` only.
        maxiter: L-BFGS-B iterations of ``fitc`` and ``sgpr``.
    """

    inducing: PositiveInt = 500
    epochs: PositiveInt = 100
    batch_size: PositiveInt = 1000
    lr: PositiveFloat = 0.01
    seed: Seed = 0
    method: Literal["svgp", "fitc", "sgpr"] = "svgp"
    maxiter: PositiveInt = 200


#: The former name of :class:`SparseGPConfig`, still importable.
SparseGPSettings = SparseGPConfig


class SparseGP:
    """A fitted sparse GP with the target standardisation it was trained with.

    Attributes:
        model: The BoTorch model on standardised targets (``SingleTaskVariationalGP`` for
            ``svgp``, an exact GP with an inducing-point kernel for ``fitc`` / ``sgpr``).
        y_mean: Mean of the training targets.
        y_std: Standard deviation of the training targets.
    """

    def __init__(self, model, y_mean: float, y_std: float):
        self.model = model
        self.y_mean = y_mean
        self.y_std = y_std

    def standardize(self, y: Tensor) -> Tensor:
        """Targets in the GP's standardised units."""
        return (y - self.y_mean) / self.y_std

    @torch.no_grad()
    def predict(self, x: Tensor, standardized: bool = False, batch_size: int = 4096) -> tuple[Tensor, Tensor]:
        """Predictive mean and variance (observation noise included) at ``x``.

        Args:
            x: Inputs ``(n, d)``.
            standardized: Return standardised units instead of the original ones.
            batch_size: Points predicted at once.

        Returns:
            ``(mean, variance)``, each ``(n,)``.
        """
        self.model.eval()
        means, variances = [], []
        x = x.to(torch.float64)
        for start in range(0, len(x), batch_size):
            post = self.model.posterior(x[start : start + batch_size], observation_noise=True)
            means.append(post.mean.squeeze(-1))
            variances.append(post.variance.squeeze(-1))
        mean, var = torch.cat(means), torch.cat(variances)
        if standardized:
            return mean, var
        return mean * self.y_std + self.y_mean, var * self.y_std**2


def _median_distance(x: Tensor, generator: torch.Generator, sample: int = 1000) -> float:
    idx = torch.randperm(len(x), generator=generator)[:sample]
    d = torch.cdist(x[idx], x[idx])
    vals = d[torch.triu(torch.ones_like(d, dtype=torch.bool), diagonal=1)]
    med = float(vals.median()) if vals.numel() else 1.0
    return med if med > 0 else 1.0


def fit_sparse_gp(x: Tensor, y: Tensor, settings: SparseGPConfig = SparseGPConfig(), description: str = "sparse GP") -> SparseGP:
    """Fit a sparse GP to ``(x, y)`` (``settings.method``: SVGP, FITC or SGPR; module doc).

    Args:
        x: Inputs (latent means), ``(n, d)``.
        y: Targets, ``(n,)``.
        settings: Training settings.
        description: Progress-bar label.

    Raises:
        DataError: For mismatched or too few points, or non-finite values.
    """
    from botorch.models.approximate_gp import SingleTaskVariationalGP
    from gpytorch.kernels import RBFKernel, ScaleKernel
    from gpytorch.likelihoods import GaussianLikelihood
    from gpytorch.mlls import VariationalELBO

    x = torch.as_tensor(x, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
    if x.dim() != 2 or len(x) != len(y):
        raise DataError(f"sparse GP: x must be (n, d) and y (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    if len(x) < 2:
        raise DataError(f"sparse GP: need at least 2 training points, got {len(x)}")
    if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
        raise DataError("sparse GP: inputs or targets contain NaN or infinity")
    gen = torch.Generator().manual_seed(settings.seed)
    y_mean, y_std = float(y.mean()), float(y.std())
    y_std = y_std if y_std > 0 else 1.0
    ys = ((y - y_mean) / y_std).unsqueeze(-1)
    m = min(settings.inducing, len(x))
    inducing = x[torch.randperm(len(x), generator=gen)[:m]].clone()
    covar = ScaleKernel(RBFKernel(ard_num_dims=x.shape[1]))
    covar.base_kernel.lengthscale = _median_distance(x, gen)
    likelihood = GaussianLikelihood()
    likelihood.noise = 0.1
    if settings.method != "svgp":
        return _fit_inducing_exact(x, ys, covar, likelihood, inducing, settings, y_mean, y_std)
    # GPyTorch draws the initial variational mean from torch's global generator, at the first
    # training call (not at construction): the whole fit runs on a forked global generator
    # seeded here, so that it depends on ``settings.seed`` only and leaves the caller's
    # stream untouched.
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")  # BoTorch's input-scaling advice; targets are standardised here
        torch.manual_seed(settings.seed)
        model = SingleTaskVariationalGP(
            x, ys, likelihood=likelihood, covar_module=covar, inducing_points=inducing, learn_inducing_points=True
        ).to(torch.float64)
        mll = VariationalELBO(model.likelihood, model.model, num_data=len(x))
        opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
        model.train()
        steps = math.ceil(len(x) / settings.batch_size)
        with progress(description, total=settings.epochs * steps) as bar:
            for epoch in range(1, settings.epochs + 1):
                order = torch.randperm(len(x), generator=gen)
                for start in range(0, len(x), settings.batch_size):
                    idx = order[start : start + settings.batch_size]
                    opt.zero_grad(set_to_none=True)
                    loss = -mll(model(x[idx]), ys[idx].squeeze(-1))
                    check_finite_loss(loss, description, f"epoch {epoch}, batch {start // settings.batch_size + 1}")
                    loss.backward()
                    opt.step()
                    bar.advance(1, elbo=-float(loss.detach()))
    model.eval()
    return SparseGP(model, y_mean, y_std)


def _inducing_kernel_classes():
    """GPyTorch's ``InducingPointKernel`` with a relative jitter on ``K_UU``, and FITC's kernel."""
    from gpytorch.kernels import InducingPointKernel
    from linear_operator import to_dense

    class JitteredInducingPointKernel(InducingPointKernel):
        """``InducingPointKernel`` whose ``K_UU`` gets ``jitter * mean(diag K_UU)`` on its diagonal.

        In BO the data hold near-duplicate points (and the inducing inputs start at a subset
        of them); with long length scales ``K_UU`` is then numerically singular, beyond the
        library's absolute jitter. A jitter relative to the kernel's scale keeps its Cholesky
        factor defined without changing the model noticeably (``jitter`` starts at 1e-6).
        """

        jitter = 1e-6

        @property
        def _inducing_mat(self):
            if not self.training and hasattr(self, "_cached_kernel_mat"):
                return self._cached_kernel_mat
            k = to_dense(self.base_kernel(self.inducing_points, self.inducing_points))
            eye = torch.eye(k.shape[-1], dtype=k.dtype, device=k.device)
            k = k + self.jitter * k.diagonal(dim1=-2, dim2=-1).mean(-1, keepdim=True).unsqueeze(-1) * eye
            if not self.training:
                self._cached_kernel_mat = k
            return k

    class FITCKernel(JitteredInducingPointKernel):
        """FITC's kernel ``Q(x, x') + delta(x, x') (k(x, x) - Q(x, x))`` (module doc).

        GPyTorch's ``InducingPointKernel`` gives ``Q`` and, at prediction, adds this
        diagonal correction; FITC uses it in training too and has no trace term.
        """

        def forward(self, x1, x2, diag=False, **kwargs):
            from linear_operator.operators import (
                DiagLinearOperator,
                LowRankRootAddedDiagLinearOperator,
                LowRankRootLinearOperator,
                MatmulLinearOperator,
            )

            left = to_dense(self.base_kernel(x1, self.inducing_points)).matmul(self._inducing_inv_root)
            if torch.equal(x1, x2):
                q = LowRankRootLinearOperator(left)
                corr = (to_dense(self.base_kernel(x1, diag=True)) - (left * left).sum(-1)).clamp_min(0)
                covar = LowRankRootAddedDiagLinearOperator(q, DiagLinearOperator(corr))
            else:
                right = to_dense(self.base_kernel(x2, self.inducing_points)).matmul(self._inducing_inv_root)
                covar = MatmulLinearOperator(left, right.transpose(-1, -2))
            return covar.diagonal(dim1=-1, dim2=-2) if diag else covar

    return JitteredInducingPointKernel, FITCKernel


def _woodbury():
    """Let the low-rank-plus-diagonal covariance use its own (exact) Woodbury solves and
    log-determinant: importing BoTorch turns GPyTorch's ``fast_computations`` off globally,
    which makes the evidence a dense ``n x n`` Cholesky (hours for 17,118 points)."""
    import gpytorch

    return gpytorch.settings.fast_computations(covar_root_decomposition=True, log_prob=True, solves=True)


def _fit_inducing_exact(x, ys, covar, likelihood, inducing, settings: SparseGPConfig, y_mean, y_std) -> SparseGP:
    """FITC or SGPR: an exact GP with an inducing-point kernel, fitted by L-BFGS-B on its evidence."""
    from botorch.models.gpytorch import GPyTorchModel
    from gpytorch.distributions import MultivariateNormal
    from gpytorch.means import ConstantMean
    from gpytorch.mlls import ExactMarginalLogLikelihood
    from gpytorch.models import ExactGP

    class InducingExactGP(ExactGP, GPyTorchModel):
        _num_outputs = 1

        def __init__(self, train_x, train_y, lik, kernel):
            super().__init__(train_x, train_y, lik)
            self.mean_module = ConstantMean()
            self.covar_module = kernel

        def forward(self, inputs):
            return MultivariateNormal(self.mean_module(inputs), self.covar_module(inputs))

        def posterior(self, *args, **kwargs):
            with _woodbury():
                return super().posterior(*args, **kwargs)

    from botorch.optim.fit import fit_gpytorch_mll_scipy
    from linear_operator.utils.errors import NotPSDError

    sgpr_cls, fitc_cls = _inducing_kernel_classes()
    kernel = (fitc_cls if settings.method == "fitc" else sgpr_cls)(covar, inducing_points=inducing, likelihood=likelihood)
    model = InducingExactGP(x, ys.squeeze(-1), likelihood, kernel).to(torch.float64)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    for jitter in (1e-6, 1e-4, 1e-2):  # a larger relative jitter only when K_UU stays singular
        model.load_state_dict(start)
        kernel.jitter = jitter
        kernel._clear_cache()
        mll = ExactMarginalLogLikelihood(likelihood, model)
        mll.train()
        try:
            with warnings.catch_warnings(), _woodbury():
                warnings.simplefilter("ignore")  # L-BFGS-B stopping at maxiter, input-scaling advice
                fit_gpytorch_mll_scipy(mll, options={"maxiter": settings.maxiter})  # deterministic: no restarts
            break
        except NotPSDError:
            if jitter == 1e-2:
                raise
    kernel._clear_cache()
    model.eval()
    return SparseGP(model, y_mean, y_std)


def rmse_pearson(pred: Tensor | np.ndarray, target: Tensor | np.ndarray) -> tuple[float, float]:
    """Root-mean-square error and Pearson's r of predictions against targets."""
    from scipy.stats import pearsonr

    p = np.asarray(pred, dtype=np.float64).reshape(-1)
    t = np.asarray(target, dtype=np.float64).reshape(-1)
    if len(p) != len(t) or len(p) < 2:
        raise DataError(f"need two equally long arrays of at least 2 values, got {len(p)} and {len(t)}")
    rmse = float(np.sqrt(np.mean((p - t) ** 2)))
    r = float(pearsonr(p, t)[0]) if np.std(p) > 0 and np.std(t) > 0 else 0.0
    return rmse, r


def gp_prediction(
    z_train: Tensor, y_train: Tensor, z_test: Tensor, y_test: Tensor, settings: SparseGPConfig = SparseGPConfig(),
    description: str = "sparse GP",
) -> tuple[float, float]:
    """One repetition of Chatzianastasis et al.'s (2021) Table 2: fit on the training latents, score the test split.

    Returns:
        ``(rmse, pearson_r)`` of the test predictions in standardised units.
    """
    gp = fit_sparse_gp(z_train, y_train, settings, description=description)
    pred, _ = gp.predict(torch.as_tensor(z_test), standardized=True)
    return rmse_pearson(pred, gp.standardize(torch.as_tensor(y_test, dtype=torch.float64)))


def summarize_predictions(rmses: list[float], rs: list[float], y_train: Tensor, y_test: Tensor) -> dict:
    """Mean and standard deviation over repetitions, and the RMSE of predicting the training mean."""
    y_tr = torch.as_tensor(y_train, dtype=torch.float64)
    y_te = (torch.as_tensor(y_test, dtype=torch.float64) - y_tr.mean()) / y_tr.std()
    return {
        "rmse": float(np.mean(rmses)),
        "rmse_std": float(np.std(rmses)),
        "pearson_r": float(np.mean(rs)),
        "pearson_r_std": float(np.std(rs)),
        "rmse_if_mean": float(torch.sqrt((y_te**2).mean())),
        "rmse_runs": list(rmses),
        "pearson_r_runs": list(rs),
    }


def predictive_performance(
    z_train: Tensor,
    y_train: Tensor,
    z_test: Tensor,
    y_test: Tensor,
    repeats: int = 10,
    settings: SparseGPConfig = SparseGPConfig(),
) -> dict:
    """Chatzianastasis et al.'s (2021) Table 2: test RMSE (standardised units) and Pearson's r of a sparse GP.

    Args:
        z_train: Training latent means.
        y_train: Training accuracies.
        z_test: Test latent means.
        y_test: Test accuracies.
        repeats: Repetitions with seeds ``settings.seed + i`` (paper: 10).
        settings: Sparse-GP settings.

    Returns:
        ``rmse``, ``pearson_r`` (means over repetitions), ``rmse_std``, ``pearson_r_std``,
        ``rmse_if_mean`` (RMSE of predicting the training mean) and the per-repetition lists.
    """
    if repeats < 1:
        raise ConfigError(f"repeats must be >= 1, got {repeats}")
    rmses, rs = [], []
    for i in range(repeats):
        s = replace(settings, seed=settings.seed + i)
        rmse, r = gp_prediction(z_train, y_train, z_test, y_test, s, description=f"sparse GP {i + 1}/{repeats}")
        rmses.append(rmse)
        rs.append(r)
    return summarize_predictions(rmses, rs, y_train, y_test)
