"""The VAE wrapper: loss terms, reparameterisation, configs and rebuilding."""

from __future__ import annotations

import pytest
import torch
from dag_factory import random_dags

from attnas.core.errors import ConfigError, DataError
from attnas.graphvae.vae import PAPER_MODELS, GraphVAE, GraphVAEConfig, paper_model


def _model(**kw):
    torch.manual_seed(0)
    return GraphVAE(GraphVAEConfig(hidden=8, latent=3, **kw), 5, 6)


def test_loss_is_recon_plus_beta_kl_and_kl_matches_formula():
    model = _model(beta=0.5)
    model.eval()  # z = mu, so the loss is deterministic
    batch = random_dags(5, 6, 5, seed=0)
    out = model.loss(batch)
    mu, logvar = model.encode(batch)
    kld = 0.5 * torch.sum(mu**2 + logvar.exp() - 1 - logvar)
    assert torch.allclose(out["kld"], kld, atol=1e-5)
    assert torch.allclose(out["loss"], out["recon"] + 0.5 * out["kld"])
    type_ll, edge_ll = model.decoder.log_likelihood(mu, model.ops, batch)
    assert torch.allclose(out["recon"], -(type_ll + edge_ll).sum())


def test_reparameterize_noise_scale_and_eval_mean():
    model = _model(eps_scale=0.01)
    mu, logvar = torch.zeros(4000, 3), torch.zeros(4000, 3)
    model.train()
    z = model.reparameterize(mu, logvar, torch.Generator().manual_seed(0))
    assert 0.008 < float(z.std()) < 0.012
    model.eval()
    assert model.reparameterize(mu, logvar) is mu


def test_paper_models():
    assert set(PAPER_MODELS) == {"D-VAE", "DVAE-EMB", "GCN", "GCN-EMB"}
    assert paper_model("DVAE-EMB").operations == "embedding" and paper_model("GCN").encoder == "gcn"
    assert paper_model("D-VAE").hidden == 501 and paper_model("D-VAE").latent == 56
    assert paper_model("GCN-EMB", hidden=7).hidden == 7
    with pytest.raises(ConfigError, match="did you mean 'D-VAE'"):
        paper_model("D-VAF")


@pytest.mark.parametrize("kw, msg", [({"encoder": "gin"}, "encoder"), ({"hidden": 0}, "hidden"), ({"beta": -1.0}, "beta")])
def test_config_validation(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        GraphVAEConfig(**kw)


def test_rebuild_from_arguments():
    model = _model(encoder="gcn", operations="embedding")
    clone = GraphVAE.from_arguments(model.arguments())
    clone.load_state_dict(model.state_dict())
    batch = random_dags(3, 6, 5, seed=1)
    assert torch.equal(model.encode(batch)[0], clone.encode(batch)[0])


def test_rejects_graphs_beyond_the_model():
    model = _model()
    with pytest.raises(DataError, match="at most 6"):
        model.encode(random_dags(2, 7, 5, seed=0, min_nodes=7))
    with pytest.raises(DataError, match="vertex type 6"):
        model.encode(random_dags(2, 6, 7, seed=0))


def test_latent_means_match_encode_in_eval_mode():
    model = _model()
    batch = random_dags(7, 6, 5, seed=2)
    model.train()
    z = model.latent_means(batch, batch_size=3)
    assert model.training
    model.eval()
    assert torch.allclose(z, model.encode(batch)[0])
