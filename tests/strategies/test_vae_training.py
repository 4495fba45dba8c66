"""The shared graph-VAE training phase: a run stopped after a checkpoint resumes to the same model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.train import VAETrainConfig, new_state
from attnas.graphvae.vae import GraphVAEConfig
from attnas.runs.run_dir import RunDir
from attnas.strategies.vae_training import train_vae_phase

VOCAB = ("input", "output", "a", "b")


class Killed(Exception):
    """Stands for SIGKILL after an epoch's event, before its checkpoint."""


def chains(count: int = 12, max_nodes: int = 5) -> DagDataset:
    """Chains input -> ... -> output of 3 to ``max_nodes`` vertices with random middle types."""
    rng = np.random.default_rng(0)
    graphs = []
    for _ in range(count):
        n = int(rng.integers(3, max_nodes + 1))
        adj = np.eye(n, k=1, dtype=np.uint8)
        graphs.append((adj, [0, *rng.integers(2, len(VOCAB), size=n - 2).tolist(), 1]))
    return DagDataset(DagBatch.from_graphs(graphs, max_nodes=max_nodes), torch.rand(count), VOCAB)


def fresh_state(data: DagDataset):
    # two iterations of three epochs: the resume crosses into the second iteration's new model
    settings = VAETrainConfig(epochs=3, batch_size=6, lr=1e-2, iterations=2, seed=1)
    return lambda: new_state(GraphVAEConfig(hidden=8, latent=2, operations="embedding"), data.num_types,
                             data.max_nodes, settings)


def never():
    raise AssertionError("a resumed phase must not build a fresh state")


def test_stopped_after_a_checkpoint_resumes_to_the_uninterrupted_model(tmp_path):
    data = chains()
    whole = RunDir.create(tmp_path / "whole", "x: 1\n", {})
    seen: list[int] = []
    ref, _ = train_vae_phase(whole, fresh_state(data), data, every=2, on_epoch=lambda st, e: seen.append(e))
    assert seen == [1, 2, 3, 4, 5, 6] and ref.done

    cut = RunDir.create(tmp_path / "cut", "x: 1\n", {})

    def stop_at_5(st, epoch):
        if epoch == 5:
            raise Killed

    with pytest.raises(Killed):
        train_vae_phase(cut, fresh_state(data), data, every=2, on_epoch=stop_at_5)
    assert cut.load_checkpoint("vae")["step"] == 4  # epoch 4 (the second iteration's first) saved
    again: list[int] = []
    state, elapsed = train_vae_phase(cut, never, data, every=2, elapsed=1e6,
                                     on_epoch=lambda st, e: again.append(e))
    assert again == [5, 6] and elapsed < 1e6  # the checkpoint's time, not the caller's
    for (name, a), (_, b) in zip(ref.model.state_dict().items(), state.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert state.history == ref.history
    saved = cut.load_checkpoint("vae")
    assert saved["step"] == 6 and set(saved["state"]) == {"train", "done", "elapsed"} and saved["state"]["done"]

    # a finished phase is reloaded, not trained
    reloaded, _ = train_vae_phase(cut, never, data, every=2, on_epoch=lambda st, e: pytest.fail("trained again"))
    assert torch.equal(next(iter(reloaded.model.state_dict().values())), next(iter(ref.model.state_dict().values())))
