"""The contextual stochastic block model (cSBM) as parameterised in GPR-GNN.

Deshpande, Sen, Montanari & Mossel, "Contextual stochastic block models", NeurIPS 2018;
parameterised by Chien, Peng, Li & Milenkovic, "Adaptive universal generalized PageRank
graph neural network" (GPR-GNN), ICLR 2021, Sec. 5 and App. G. Two classes
``v_i in {+1, -1}`` (the first half +1), ``n`` nodes, ``p`` features, average degree ``d``:

- features ``b_i = sqrt(mu / n) v_i u + Z_i / sqrt(p)``, ``u ~ N(0, I_p / p)``, ``Z_i ~ N(0, I_p)``;
- edges ``P(A_ij = 1) = c_in / n`` if ``v_i = v_j`` else ``c_out / n``, with
  ``c_in = d + sqrt(d) lambda``, ``c_out = d - sqrt(d) lambda``;
- ``lambda^2 + mu^2 / xi = 1 + epsilon`` (``xi = n / p``): ``epsilon`` is how far the
  problem is above the detection threshold, and ``phi = (2 / pi) arctan(lambda sqrt(xi) / mu)``
  sets the share of the signal carried by the graph: ``phi = -1`` fully heterophilous,
  ``0`` graph uninformative, ``1`` fully homophilous. Hence
  ``lambda = sqrt(1 + epsilon) sin(pi phi / 2)`` and ``mu = sqrt(xi (1 + epsilon)) cos(pi phi / 2)``.

Everything is drawn from one NumPy generator seeded with ``seed``; the ten dense splits
(60 / 20 / 20 %, stratified) from seeds ``seed * 100 + s``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attnas.core.errors import ConfigError
from attnas.data.graphs import SPLITS, GraphDataset, random_split_masks
from attnas.data.heterophilous import graph_with_splits

NUM_SPLITS = 10


def csbm_parameters(phi: float, epsilon: float, n: int, p: int) -> tuple[float, float]:
    """``(lambda, mu)`` of GPR-GNN's parameterisation for ``phi`` and ``epsilon``."""
    lam = math.sqrt(1 + epsilon) * math.sin(math.pi * phi / 2)
    mu = math.sqrt(n / p * (1 + epsilon)) * math.cos(math.pi * phi / 2)
    return lam, mu


def csbm_graph(n: int = 5000, p: int = 2000, d: float = 5.0, epsilon: float = 3.25, phi: float = 0.0,
               seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draw a cSBM graph.

    Returns:
        ``(x [n, p] float, y [n] in {0, 1} (class 0 is v = +1), edge_index [2, E] undirected)``.

    Raises:
        ConfigError: When ``|lambda| > sqrt(d)`` (an edge probability would be negative or above 1).
    """
    lam, mu = csbm_parameters(phi, epsilon, n, p)
    c_in, c_out = d + math.sqrt(d) * lam, d - math.sqrt(d) * lam
    if min(c_in, c_out) < 0 or max(c_in, c_out) > n:
        raise ConfigError(f"cSBM: epsilon={epsilon}, phi={phi} and d={d} give lambda={lam:.3f}, beyond sqrt(d)="
                          f"{math.sqrt(d):.3f} (negative edge probability); lower epsilon or raise d")
    rng = np.random.default_rng(seed)
    v = np.ones(n)
    v[n // 2:] = -1
    u = rng.normal(0.0, 1.0 / math.sqrt(p), size=p)
    x = math.sqrt(mu / n) * np.outer(v, u) + rng.standard_normal((n, p)) / math.sqrt(p)
    src, dst = [], []
    for i in range(n - 1):  # the upper triangle, one row at a time: exact Bernoulli draws in O(n) memory
        same = v[i + 1:] == v[i]
        prob = np.where(same, c_in / n, c_out / n)
        js = np.nonzero(rng.random(n - i - 1) < prob)[0] + i + 1
        src.append(np.full(js.size, i))
        dst.append(js)
    s, t = np.concatenate(src), np.concatenate(dst)
    edge_index = torch.from_numpy(np.stack([np.concatenate([s, t]), np.concatenate([t, s])])).long()
    y = torch.from_numpy((v < 0).astype(np.int64))
    return torch.from_numpy(x).float(), y, edge_index


def load_csbm(n: int = 5000, p: int = 2000, d: float = 5.0, epsilon: float = 3.25, phi: float = 0.0,
              seed: int = 0) -> GraphDataset:
    """A cSBM graph with :data:`NUM_SPLITS` dense stratified 60/20/20 splits."""
    x, y, edge_index = csbm_graph(n, p, d, epsilon, phi, seed)
    drawn = [random_split_masks(y, train_frac=0.6, val=0.2, seed=seed * 100 + s) for s in range(NUM_SPLITS)]
    masks = {split: torch.stack([m[i] for m in drawn]) for i, split in enumerate(SPLITS)}
    return graph_with_splits(x, y, edge_index, masks, f"csbm(phi={phi}, seed={seed})")
