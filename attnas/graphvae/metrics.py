"""Chatzianastasis et al.'s (2021) Table 1: reconstruction accuracy, prior validity and uniqueness.

D-VAE's protocol (Zhang et al. 2019, Sec. 4.1; public ``train.py``, ``test`` and
``prior_validity``), which Chatzianastasis et al. (2021) follow:

- **Reconstruction accuracy**: every test graph is encoded 10 times and each encoding is
  decoded 10 times (stochastic decoding); the fraction of the decodings that are exactly
  the input graph (same node count, same type and same in-neighbours at every index). In
  evaluation mode the encoding is the posterior mean, so the 10 encodings are identical
  and this is 100 stochastic decodings of the mean.
- **Validity**: 1,000 latent points are drawn from the prior, moved to the range of the
  training latent means (``z = eps * std(Z_train) + mean(Z_train)``, D-VAE's
  ``prior_validity(scale_to_train_range=True)``), and each is decoded 10 times; the
  fraction of the 10,000 decodings that are valid (ENAS: :func:`is_valid_enas`).
- **Uniqueness**: distinct valid graphs divided by the number of valid decodings.
- **Novelty** (reported by D-VAE, not in Chatzianastasis et al.'s table): the fraction of valid
  decodings not in the training set.

All values are fractions in [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from attnas.config import CheckedConfig, PositiveInt
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.vae import GraphVAE
from attnas.graphvae.validity import is_valid_enas
from attnas.reporting.progress import progress


def same_dag(a: DagBatch, b: DagBatch) -> Tensor:
    """D-VAE's ``is_same_DAG`` for pairs ``(a[i], b[i])`` (``(G,)`` bool)."""
    n = max(a.max_nodes, b.max_nodes)
    a, b = a.pad_to(n), b.pad_to(n)
    mask = a.node_mask()
    same_types = ((a.types == b.types) | ~mask).all(1)
    return (a.n_nodes == b.n_nodes) & same_types & (a.adj == b.adj).flatten(1).all(1)


@torch.no_grad()
def reconstruction_accuracy(
    model: GraphVAE,
    graphs: DagBatch,
    encode_times: int = 10,
    decode_times: int = 10,
    batch_size: int = 256,
    generator: torch.Generator | None = None,
) -> float:
    """Fraction of decodings that reproduce their input graph exactly.

    Args:
        model: The VAE (set to evaluation mode here, so encodings are posterior means).
        graphs: The graphs to reconstruct (D-VAE: the test set).
        encode_times: Encodings per graph (D-VAE: 10; identical in evaluation mode).
        decode_times: Stochastic decodings per encoding (D-VAE: 10).
        batch_size: Graphs encoded and decoded at once.
        generator: Random generator of the stochastic decoding.
    """
    was = model.training
    model.eval()
    hits, total = 0, 0
    try:
        with progress("reconstruction accuracy", total=len(graphs)) as bar:
            for start in range(0, len(graphs), batch_size):
                batch = graphs.index(slice(start, start + batch_size))
                mu, logvar = model.encode(batch)
                for _ in range(encode_times):
                    z = model.reparameterize(mu, logvar, generator)
                    for _ in range(decode_times):
                        decoded = model.decode(z, generator=generator)
                        hits += int(same_dag(batch, decoded).sum())
                        total += len(batch)
                bar.advance(len(batch))
    finally:
        model.train(was)
    return hits / max(total, 1)


@torch.no_grad()
def prior_samples(
    model: GraphVAE,
    n_points: int = 1000,
    decode_times: int = 10,
    train_latents: Tensor | None = None,
    batch_size: int = 1000,
    generator: torch.Generator | None = None,
) -> DagBatch:
    """Decode ``n_points`` prior draws ``decode_times`` times each (D-VAE's ``prior_validity``).

    Args:
        model: The VAE.
        n_points: Latent points drawn from ``N(0, I)`` (D-VAE: 1,000).
        decode_times: Decodings per point (D-VAE: 10).
        train_latents: Training latent means; when given, each draw is scaled to their
            per-dimension mean and standard deviation, as D-VAE does for its Table 1.
        batch_size: Points decoded at once.
        generator: Random generator for the draws and the decoding.

    Returns:
        All ``n_points * decode_times`` decoded graphs.
    """
    was = model.training
    model.eval()
    latent = model.config.latent
    out = []
    try:
        with progress("prior decoding", total=n_points * decode_times) as bar:
            for start in range(0, n_points, batch_size):
                k = min(batch_size, n_points - start)
                z = torch.randn(k, latent, generator=generator)
                if train_latents is not None:
                    z = z * train_latents.std(0) + train_latents.mean(0)
                for _ in range(decode_times):
                    out.append(model.decode(z, generator=generator))
                    bar.advance(k)
    finally:
        model.train(was)
    return DagBatch.cat(out)


def validity_uniqueness(
    samples: DagBatch,
    is_valid: Callable[[DagBatch], Tensor] = is_valid_enas,
    train_keys: set[str] | None = None,
) -> dict[str, float]:
    """Validity, uniqueness (and novelty, given the training keys) of decoded graphs.

    Args:
        samples: Decoded graphs (e.g. from :func:`prior_samples`).
        is_valid: The validity test (default: D-VAE's ENAS test).
        train_keys: :meth:`DagBatch.keys` of the training graphs, for novelty.

    Returns:
        ``{"validity", "uniqueness"}`` and, with ``train_keys``, ``"novelty"``.
    """
    valid = is_valid(samples)
    n_valid = int(valid.sum())
    keys = samples.index(valid.nonzero().squeeze(1)).keys() if n_valid else []
    out = {
        "validity": n_valid / max(len(samples), 1),
        "uniqueness": len(set(keys)) / n_valid if n_valid else 0.0,
    }
    if train_keys is not None:
        out["novelty"] = sum(k not in train_keys for k in keys) / n_valid if n_valid else 0.0
    return out


@dataclass(frozen=True)
class Table1Config(CheckedConfig):
    """How many graphs and decodings Table 1 uses (defaults: D-VAE's protocol).

    Attributes:
        recon_graphs: Test graphs reconstructed (None: all).
        encode_times: Encodings per test graph (D-VAE: 10).
        decode_times: Decodings per encoding (D-VAE: 10).
        prior_points: Prior points decoded for validity and uniqueness (D-VAE: 1,000).
        prior_decodes: Decodings per prior point (D-VAE: 10).
    """

    recon_graphs: PositiveInt | None = None
    encode_times: PositiveInt = 10
    decode_times: PositiveInt = 10
    prior_points: PositiveInt = 1000
    prior_decodes: PositiveInt = 10


#: The former name of :class:`Table1Config`, still importable.
Table1Settings = Table1Config


def table1(
    model: GraphVAE,
    train: DagBatch,
    test: DagBatch,
    settings: Table1Config = Table1Config(),
    is_valid: Callable[[DagBatch], Tensor] = is_valid_enas,
    seed: int = 0,
    extra_valid: dict[str, Callable[[DagBatch], Tensor]] | None = None,
    z_train: Tensor | None = None,
) -> dict[str, float]:
    """Chatzianastasis et al.'s (2021) Table 1 with D-VAE's protocol: reconstruction accuracy, validity, uniqueness.

    Args:
        model: The trained VAE.
        train: The training graphs (their latent means scale the prior draws; their keys
            give the novelty).
        test: The graphs to reconstruct (the first ``settings.recon_graphs`` of them).
        settings: Sample sizes.
        is_valid: The validity test (ENAS: D-VAE's :func:`is_valid_enas`).
        seed: Seed of the stochastic decodings and the prior draws.
        extra_valid: More validity tests, each reported as ``validity_<name>`` (e.g.
            whether a decoding is an architecture of a given space).
        z_train: The training latent means, when already computed.

    Returns:
        ``recon_accuracy``, ``validity``, ``uniqueness``, ``novelty`` (fractions).
    """
    gen = torch.Generator().manual_seed(seed)
    graphs = test if settings.recon_graphs is None else test.index(slice(0, settings.recon_graphs))
    out = {"recon_accuracy": reconstruction_accuracy(model, graphs, settings.encode_times, settings.decode_times,
                                                     generator=gen)}
    z_train = model.latent_means(train) if z_train is None else z_train
    samples = prior_samples(model, settings.prior_points, settings.prior_decodes, train_latents=z_train, generator=gen)
    out.update(validity_uniqueness(samples, is_valid, train_keys=set(train.keys())))
    for name, test_fn in (extra_valid or {}).items():
        out[f"validity_{name}"] = float(test_fn(samples).float().mean())
    return out
