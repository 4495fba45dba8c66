"""Gradients of the batched loss (SharedLinear, deferred decoder schedule) against the
per-graph reference of D-VAE's procedure and against the stepwise schedule, in float64."""

from __future__ import annotations

import pytest
import torch
from dag_factory import random_dags
from reference_dvae import encode_one, log_likelihood_one

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


@pytest.mark.parametrize("round3", [False, True])
@pytest.mark.parametrize("operations", ["onehot", "embedding"])
@pytest.mark.parametrize("chains", [False, True])
def test_loss_gradients_equal_the_per_graph_reference(operations, chains, round3):
    model = _model(operations=operations)
    if round3:  # the modules called at every vertex, every decoder term at its step
        model.encoder.shared_weight_grads = False
        model.decoder.schedule = "stepwise"
    model.eval()  # z = mu: deterministic
    batch = random_dags(6, max_nodes=7, num_types=6, seed=4, min_nodes=7 if chains else 3)
    if chains:  # every vertex follows the previous one, as in ENAS: the encoder's index sweep
        idx = torch.arange(6)
        batch.adj[:, idx, idx + 1] = True
    got = _grads(model, model.loss(batch)["loss"])
    ref = _grads(model, _reference_loss(model, batch))
    assert got.keys() == ref.keys()
    for name in ref:
        assert torch.allclose(got[name], ref[name], atol=1e-10, rtol=1e-8), name


def test_deferred_and_stepwise_decoder_schedules_agree_with_gradients():
    model = _model()
    batch = random_dags(9, max_nodes=7, num_types=6, seed=1)
    z = torch.randn(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    out = {}
    for schedule in ("deferred", "stepwise"):
        model.decoder.schedule = schedule
        type_ll, edge_ll = model.decoder.log_likelihood(z, model.ops, batch)
        out[schedule] = (type_ll.detach(), edge_ll.detach(), _grads(model, -(type_ll + edge_ll).sum()))
    (t1, e1, g1), (t2, e2, g2) = out["deferred"], out["stepwise"]
    assert torch.allclose(t1, t2, atol=1e-12) and torch.allclose(e1, e2, atol=1e-12)
    for name in g2:
        assert torch.allclose(g1[name], g2[name], atol=1e-12), name


def test_round5_and_round4_computations_agree_with_gradients():
    """The fused edge MLP, unbind slicing, fused GRU step, input products and per-map weight
    gradients (defaults) against round 4's computation (``fused_edges`` / ``layout_tuned`` off), on ENAS-like chains."""
    model = _model()
    model.eval()
    batch = random_dags(5, max_nodes=7, num_types=6, seed=3, min_nodes=7)
    idx = torch.arange(6)
    batch.adj[:, idx, idx + 1] = True  # chains: the encoder's stacked two-direction sweep
    out = {}
    for new in (True, False):
        model.decoder.fused_edges = model.decoder.layout_tuned = model.encoder.layout_tuned = new
        loss = model.loss(batch)["loss"]
        out[new] = (loss.detach(), _grads(model, loss))
    (l5, g5), (l4, g4) = out[True], out[False]
    assert torch.allclose(l5, l4, atol=1e-12)
    assert g5.keys() == g4.keys()
    for name in g4:
        assert torch.allclose(g5[name], g4[name], atol=1e-12), name
