"""Loss gradients of the batched model against the per-graph reference of D-VAE's
procedure (:mod:`attnas.graphvae.reference_dvae`), in float64."""

from __future__ import annotations

import pytest
import torch
from dag_factory import random_dags

from attnas.graphvae.reference_dvae import encode_one, log_likelihood_one
from attnas.graphvae.vae import GraphVAE, GraphVAEConfig


def _model(**kw):
    torch.manual_seed(0)
    return GraphVAE(GraphVAEConfig(hidden=10, latent=4, **kw), 6, 7).double()


def _grads(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def _reference_loss(model, batch):
    total = 0.0
    for i in range(len(batch)):
        types, adj, n = batch.types[i].tolist(), batch.adj[i].tolist(), int(batch.n_nodes[i])
        mu, logvar = encode_one(model, types, adj, n)
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        total = total - log_likelihood_one(model, mu, types, adj, n) + model.config.beta * kld
    return total


@pytest.mark.parametrize("operations", ["onehot", "embedding"])
@pytest.mark.parametrize("chains", [False, True])
def test_loss_gradients_equal_the_per_graph_reference(operations, chains):
    model = _model(operations=operations)
    model.eval()  # z = mu: deterministic
    batch = random_dags(6, max_nodes=7, num_types=6, seed=4, min_nodes=7 if chains else 3)
    if chains:  # every vertex follows the previous one, as in ENAS: the encoder's two-direction index sweep
        idx = torch.arange(6)
        batch.adj[:, idx, idx + 1] = True
    got = _grads(model, model.loss(batch)["loss"])
    ref = _grads(model, _reference_loss(model, batch))
    assert got.keys() == ref.keys()
    for name in ref:
        assert torch.allclose(got[name], ref[name], atol=1e-10, rtol=1e-8), name
