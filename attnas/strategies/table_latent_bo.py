"""``table-latent-bo``: Bayesian optimisation in a graph VAE's latent space over a table.

Chatzianastasis, Dasoulas, Siolas, Vazirgiannis, *Operation Embeddings for Neural
Architecture Search* (Sec. 4.3), following D-VAE (Zhang et al., NeurIPS 2019): a graph VAE
trained without labels (strategy ``graph-vae`` on dataset ``nbg-<dataset>``, its ``vae.pt``)
maps every architecture of the space to its posterior mean ``mu(A)``; a Gaussian process
on the latents of the queried architectures predicts validation performance, and the
unqueried architectures with the highest expected improvement

    EI(z) = (m(z) - y* - xi) Phi(u) + s(z) phi(u),   u = (m(z) - y* - xi) / s(z)

(``m``, ``s``: the GP's posterior mean and standard deviation, ``y*`` the best validation
performance so far) are queried next, ``batch`` at a time. The space is a finite table,
so the acquisition is maximised over a finite set of unqueried architectures instead of over
decoded latent points: ``pool`` drawn at random for each batch (all of them with ``pool: 0``),
or, with ``around_best: k``, the one-step neighbours (one operation or one input changed) of
the ``k`` best architectures queried so far, as BANANAS (White, Neiswanger, Savani, AAAI 2021)
maximises its acquisition over mutations of the best architectures, the discrete
counterpart of a local ascent of EI started at the incumbents (fewer than ``batch``
such neighbours left: the pool). The first ``initial`` architectures are random search's first draws (paired
seeds). The GP is scikit-learn's exact GP (constant x RBF kernel plus white noise, or
``kernel: matern`` for a Matern 5/2 in place of the RBF; hyper-parameters by maximum
likelihood, targets standardised) refitted before each batch.
Under ``constraints`` the initial draws and the acquisition's candidates are the
architectures within every limit only (:meth:`ValidationQueries.constrain`).
"""

from __future__ import annotations

import functools
import random
import warnings
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
import torch
from scipy.stats import norm

from attnas.config import PositiveInt, Range
from attnas.core.errors import ConfigError
from attnas.graphvae.space_dags import space_dataset
from attnas.graphvae.vae import GraphVAE
from attnas.registry import register_strategy
from attnas.runtime.blas_threads import blas_limited
from attnas.runs.checkpoint_files import load_checkpoint_file
from attnas.strategies.table_search import best_by_validation
from attnas.strategies.table_strategies import ConstrainedConfig, _TableStrategy
from attnas.tasks.nas_bench_graph import ValidationQueries


@functools.lru_cache(maxsize=4)
def space_latents(vae_file: str) -> np.ndarray:
    """The standardised posterior means of every architecture of the space the VAE was
    trained on (``operations: all`` or ``proteins``, by its vocabulary), in index order.

    Raises:
        ConfigError: When the file is not a graph VAE of a NAS-Bench-Graph vocabulary.
    """
    from attnas.spaces.nas_bench_graph import NasBenchGraphConfig, NasBenchGraphSpace

    try:
        data = load_checkpoint_file(vae_file)
    except Exception as exc:
        raise ConfigError(f"strategy.vae_file: cannot read {vae_file}: {exc}") from None
    spaces = {o: NasBenchGraphSpace(NasBenchGraphConfig(operations=o)) for o in ("all", "proteins")}
    space = next((sp for sp in spaces.values() if data.get("vocab") == sp.dag_vocabulary()), None)
    if space is None:
        raise ConfigError(f"strategy.vae_file: {vae_file} was trained on vertex labels {data.get('vocab')}, "
                          f"not a NAS-Bench-Graph space's")
    model = GraphVAE.from_arguments(data["model_args"])
    model.load_state_dict(data["model"])
    model.eval()
    dags = space_dataset(space, [space.arch_at(i) for i in range(len(space.index))], max_nodes=model.max_nodes)
    with torch.no_grad():
        mu = torch.cat([model.encode(dags.graphs.index(list(range(s, min(s + 2048, len(dags))))))[0]
                        for s in range(0, len(dags), 2048)]).double().numpy()
    std = mu.std(axis=0)
    return (mu - mu.mean(axis=0)) / np.where(std > 0, std, 1.0)


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float, xi: float = 0.0) -> np.ndarray:
    """EI of maximisation at posterior ``mean`` and ``std`` over the incumbent ``best``."""
    std = np.maximum(std, 1e-12)
    u = (mean - best - xi) / std
    return (mean - best - xi) * norm.cdf(u) + std * norm.pdf(u)


def acquisition_candidates(queries: ValidationQueries, unseen: np.ndarray, rng: random.Random, pool: int,
                           around_best: int, batch: int) -> np.ndarray:
    """The unqueried feasible architectures (``unseen``) the acquisition is maximised over, ascending.

    ``around_best > 0``: the neighbours of the ``around_best`` best queried architectures, when at
    least ``batch`` of them are unqueried; otherwise ``pool`` of ``unseen`` drawn uniformly (0: all).
    """
    if around_best:
        near = {j for k in best_by_validation(queries, around_best)
                for j in queries.neighbours(queries.trace[k]) if unseen[j]}
        if len(near) >= batch:
            return np.asarray(sorted(near))
    candidates = np.flatnonzero(unseen)
    if 0 < pool < len(candidates):
        candidates = np.sort(np.asarray(rng.sample(candidates.tolist(), pool)))
    return candidates


def latent_bo(queries: ValidationQueries, budget: int, rng: random.Random, latents: np.ndarray,
              initial: int = 10, batch: int = 10, pool: int = 2000, around_best: int = 0,
              kernel: str = "rbf") -> None:
    """Query ``initial`` random architectures, then batches of the highest expected improvement
    among the :func:`acquisition_candidates` (``pool`` uniform unqueried ones, 0: all of them;
    or the neighbours of the ``around_best`` best queried ones)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern, WhiteKernel

    while queries.spent < min(initial, budget):
        queries.query(queries.sample_unseen(rng))
    unseen = queries.feasible.copy()  # over a constraint: never a candidate
    while queries.spent < budget:
        unseen[queries.trace] = False
        y = np.asarray(queries.scores)
        scale = np.sqrt(latents.shape[1])
        similarity = Matern(length_scale=scale, nu=2.5) if kernel == "matern" else RBF(length_scale=scale)
        covariance = ConstantKernel(1.0) * similarity + WhiteKernel(0.1)
        with warnings.catch_warnings(), blas_limited():  # a bound reached is a fit, not an error
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp = GaussianProcessRegressor(covariance, normalize_y=True, random_state=0).fit(latents[queries.trace], y)
            candidates = acquisition_candidates(queries, unseen, rng, pool, around_best, batch)
            mean, std = gp.predict(latents[candidates], return_std=True)
        ei = expected_improvement(mean, std, float(y.max()))
        for i in candidates[np.argsort(-ei, kind="stable")[: budget - queries.spent][:batch]]:
            queries.query(int(i))


@dataclass(frozen=True)
class TableLatentBOConfig(ConstrainedConfig):
    """Options of ``table-latent-bo``.

    Attributes:
        vae_file: A graph VAE trained on this space (``vae.pt`` of a ``graph-vae`` run).
        initial: Random architectures before the first GP.
        batch: Architectures queried per GP fit (the highest expected improvement).
        pool: Unqueried architectures drawn per batch to maximise the acquisition over
            (0: every unqueried architecture).
        around_best: When > 0, maximise the acquisition over the unqueried neighbours of
            this many best queried architectures instead (BANANAS' mutation candidates;
            the pool when fewer than ``batch`` are left); 0: the pool.
        kernel: The GP's kernel on the latents: ``rbf`` or ``matern`` (5/2).
    """

    vae_file: str = ""
    initial: PositiveInt = 10
    batch: PositiveInt = 10
    pool: Annotated[int, Range(0)] = 2000
    around_best: Annotated[int, Range(0)] = 0
    kernel: Literal["rbf", "matern"] = "rbf"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.vae_file:
            raise ConfigError("strategy.vae_file: 'table-latent-bo' needs a graph VAE of the space (a graph-vae "
                              "run's vae.pt)")


@register_strategy("table-latent-bo")
class TableLatentBO(_TableStrategy):
    """Expected-improvement BO in a graph VAE's latent space over a table (operation embeddings, D-VAE)."""

    name = "table-latent-bo"
    Config = TableLatentBOConfig

    @classmethod
    def run_loop(cls, queries: ValidationQueries, options: Any, seed: int) -> None:
        latents = space_latents(options.vae_file)
        if len(latents) != queries.n:
            raise ConfigError(f"strategy.vae_file: the VAE's space has {len(latents)} architectures, the task's "
                              f"table {queries.n} (proteins needs a VAE trained on nbg-proteins)")
        cls.prepare(queries, options)
        latent_bo(queries, options.budget, random.Random(seed), latents, options.initial, options.batch, options.pool,
                  options.around_best, options.kernel)
