"""Training: embeddings learn, state resumes exactly, iterations carry embeddings, tiny sets overfit."""

from __future__ import annotations

import io

import pytest
import torch
from dag_factory import random_dags

from attnas.core.errors import CheckpointError, ConfigError
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.metrics import reconstruction_accuracy
from attnas.graphvae.train import TrainSettings, TrainState, fit, new_state, next_iteration, train_epoch
from attnas.graphvae.vae import GraphVAEConfig

VOCAB = ("input", "output", "a", "b", "c")


def _data(count=24, seed=0, max_nodes=6):
    return DagDataset(random_dags(count, max_nodes, len(VOCAB), seed=seed), torch.rand(count), VOCAB)


def _cfg(**kw):
    return GraphVAEConfig(hidden=16, latent=4, **kw)


def test_embeddings_are_trained_and_onehot_has_none():
    data = _data()
    emb = new_state(_cfg(operations="embedding"), 5, 6, TrainSettings(epochs=1, batch_size=8, lr=1e-2))
    before = emb.model.operation_embeddings()
    assert before.shape == (5, 3)
    train_epoch(emb, data)
    assert not torch.allclose(before, emb.model.operation_embeddings())
    onehot = new_state(_cfg(operations="onehot"), 5, 6, TrainSettings(epochs=1))
    assert onehot.model.operation_embeddings() is None
    assert not any("embedding" in n for n, _ in onehot.model.named_parameters())


def test_resume_from_state_dict_continues_exactly():
    data = _data()
    settings = TrainSettings(epochs=2, batch_size=8, lr=1e-3, seed=3)
    straight = new_state(_cfg(encoder="gcn", bidirectional=False), 5, 6, settings)
    train_epoch(straight, data)
    train_epoch(straight, data)

    first = new_state(_cfg(encoder="gcn", bidirectional=False), 5, 6, settings)
    train_epoch(first, data)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    buf.seek(0)
    resumed = TrainState.from_state_dict(torch.load(buf, weights_only=False))
    train_epoch(resumed, data)
    for (n, a), (_, b) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), n
    assert resumed.history == straight.history and resumed.epoch == 2


def test_iterations_carry_only_the_embeddings():
    data = _data()
    state = new_state(_cfg(operations="embedding"), 5, 6, TrainSettings(epochs=1, batch_size=8, lr=1e-2, iterations=2))
    train_epoch(state, data)
    emb = state.model.operation_embeddings()
    nxt = next_iteration(state)
    assert nxt.iteration == 1 and nxt.epoch == 0
    assert torch.equal(nxt.model.operation_embeddings(), emb)
    assert not torch.equal(nxt.model.decoder.fc_h0.weight, state.model.decoder.fc_h0.weight)


def test_fit_runs_every_iteration_and_calls_back():
    data = _data()
    seen = []
    state = new_state(_cfg(operations="embedding"), 5, 6, TrainSettings(epochs=2, batch_size=8, iterations=2, max_batches=1))
    final = fit(state, data, on_epoch=lambda s: seen.append((s.iteration, s.epoch)))
    assert seen == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert final.done and len(final.history) == 4


def test_tiny_set_overfits_to_perfect_reconstruction():
    data = _data(count=6, seed=1, max_nodes=5)
    state = new_state(_cfg(), 5, 5, TrainSettings(epochs=60, batch_size=6, lr=1e-2))
    for _ in range(60):
        train_epoch(state, data)
    model = state.model
    model.eval()
    mu, _ = model.encode(data.graphs)
    decoded = model.decode(mu, stochastic=False)
    assert torch.equal(decoded.types, data.graphs.types) and torch.equal(decoded.adj, data.graphs.adj)
    assert reconstruction_accuracy(model, data.graphs, 1, 5, generator=torch.Generator().manual_seed(0)) > 0.9


def test_bad_settings_and_state():
    with pytest.raises(ConfigError, match="epochs"):
        TrainSettings(epochs=0)
    with pytest.raises(ConfigError, match="lr"):
        TrainSettings(lr=0)
    with pytest.raises(CheckpointError, match="incomplete"):
        TrainState.from_state_dict({"settings": {}})


@pytest.mark.parametrize("encoder", ["dvae", "gcn"])
def test_bf16_precision_gives_a_close_loss_and_fp32_training_state(encoder):
    from attnas.graphvae.vae import precision_context

    data = _data()
    cfg = _cfg(encoder=encoder, bidirectional=encoder == "dvae")
    fp32 = new_state(cfg, 5, 6, TrainSettings(epochs=1, batch_size=8, lr=1e-2, seed=1))
    bf16 = new_state(cfg, 5, 6, TrainSettings(epochs=1, batch_size=8, lr=1e-2, seed=1, precision="bf16"))
    fp32.model.eval()
    bf16.model.eval()  # z = mu in both
    with precision_context("bf16"):
        low = bf16.model.loss(data.graphs)
    high = fp32.model.loss(data.graphs)
    assert low["loss"].dtype == torch.float32
    assert float(low["loss"].detach()) == pytest.approx(float(high["loss"].detach()), rel=0.02)
    assert float(low["loss"].detach()) != float(high["loss"].detach())  # the products did run in bf16
    rec = train_epoch(bf16, data)
    assert rec["loss"] == rec["loss"] and all(p.dtype == torch.float32 for p in bf16.model.parameters())
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in bf16.model.parameters())
    with pytest.raises(ConfigError, match="precision"):
        TrainSettings(precision="fp16")


def test_a_nan_loss_is_a_training_error_naming_the_step_and_leaves_the_weights(monkeypatch):
    from attnas.core.errors import TrainingError
    from attnas.graphvae.vae import GraphVAE

    data = _data()
    state = new_state(_cfg(), 5, 6, TrainSettings(epochs=2, batch_size=8, lr=1e-2))
    train_epoch(state, data)
    before = {k: v.clone() for k, v in state.model.state_dict().items()}
    original = GraphVAE.loss
    calls = []

    def loss(self, batch, generator=None):
        out = original(self, batch, generator=generator)
        calls.append(1)
        return {**out, "loss": out["loss"] * float("nan")} if len(calls) == 2 else out

    monkeypatch.setattr(GraphVAE, "loss", loss)
    with pytest.raises(TrainingError, match=r"^graph-VAE training: the training loss became nan at iteration 1, "
                                            r"epoch 2, batch 2;"):
        train_epoch(state, data)
    assert state.epoch == 1  # the epoch did not count
    changed = [k for k, v in state.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed  # batch 1 of epoch 2 trained; batch 2's NaN reached no weight:
    assert all(torch.isfinite(v).all() for v in state.model.state_dict().values() if v.is_floating_point())
