"""Latent BO returns decoded valid DAGs and says where every score came from."""

from __future__ import annotations

import pytest
import torch
from dag_factory import random_dags

from attnas.core.errors import ConfigError
from attnas.graphvae.bo import INVALID, BOSettings, BOState, decode_most_common, latent_bo
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.dag_dataset import DagDataset
from attnas.graphvae.evaluator import SurrogateEvaluator, TableEvaluator
from attnas.graphvae.gp import SparseGPSettings, fit_sparse_gp
from attnas.graphvae.train import TrainSettings, new_state, train_epoch
from attnas.graphvae.vae import GraphVAEConfig
from attnas.graphvae.validity import is_valid_dag

VOCAB = ("input", "output", "a", "b", "c")
GP = SparseGPSettings(inducing=8, epochs=10, batch_size=16, lr=0.05)


@pytest.fixture(scope="module")
def trained():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = DagDataset(random_dags(12, 5, 5, seed=7), torch.linspace(0.6, 0.8, 12), VOCAB)
        state = new_state(GraphVAEConfig(hidden=16, latent=3), 5, 5, TrainSettings(epochs=60, batch_size=12, lr=1e-2))
        for _ in range(60):
            train_epoch(state, data)
        state.model.eval()
    finally:
        torch.set_num_threads(before)  # later tests compare in-process results with subprocesses
    return state.model, data


def test_surrogate_answers_are_gp_predictions(trained):
    model, data = trained
    z = model.latent_means(data.graphs)
    gp = fit_sparse_gp(z, data.y, GP)
    answers = SurrogateEvaluator(model, gp).evaluate(data.graphs.index([0, 1]))
    expected, _ = gp.predict(z[:2])
    assert [a.source for a in answers] == ["surrogate", "surrogate"]
    assert [a.value for a in answers] == pytest.approx(expected.tolist())


def test_decode_most_common_returns_valid_graphs(trained):
    model, data = trained
    z = model.latent_means(data.graphs.index([0, 1, 2]))
    out = decode_most_common(model, z, attempts=8, is_valid=is_valid_dag, generator=torch.Generator().manual_seed(0))
    assert len(out) == 3
    for g in out:
        assert g is None or (len(g) == 1 and bool(is_valid_dag(g)[0]))


def test_decode_most_common_takes_a_preferred_decoding_when_there_is_one(trained):
    model, data = trained
    z = model.latent_means(data.graphs.index([0, 1, 2, 3]))
    plain = decode_most_common(model, z, 20, is_valid_dag, torch.Generator().manual_seed(1))
    banned = {g.keys()[0] for g in plain if g is not None}

    def prefer(b):  # anything but the plain winners
        return torch.tensor([k not in banned for k in b.keys()])

    again = decode_most_common(model, z, 20, is_valid_dag, torch.Generator().manual_seed(1), prefer=prefer)
    never = decode_most_common(model, z, 20, is_valid_dag, torch.Generator().manual_seed(1),
                               prefer=lambda b: torch.zeros(len(b), dtype=torch.bool))
    assert [g is None for g in again] == [g is None for g in plain]
    assert [None if g is None else g.keys()[0] for g in never] == [None if g is None else g.keys()[0] for g in plain]
    moved = [a.keys()[0] != p.keys()[0] for a, p in zip(again, plain) if p is not None]
    for a, p in zip(again, plain):  # the same decodings (same seed): a preferred one replaces the winner
        if a is not None and a.keys()[0] in banned:
            assert a.keys()[0] == p.keys()[0]  # only when no other valid decoding appeared
    assert any(moved), "every point decoded to a single graph 20 times; the test needs some spread"


def test_bo_proposals_are_valid_and_labelled(trained):
    model, data = trained
    z = model.latent_means(data.graphs)
    table_part = data.subset(range(6))  # the table holds half the architectures
    evaluator = TableEvaluator.from_dataset(table_part, SurrogateEvaluator(model, fit_sparse_gp(z, data.y, GP)))
    settings = BOSettings(iterations=2, batch_size=3, decode_attempts=10, num_restarts=2, raw_samples=16, mc_samples=16, gp=GP)
    rounds = []
    result = latent_bo(model, z, data.y, evaluator, is_valid_dag, settings, on_iteration=lambda i, p: rounds.append(i))
    assert rounds == [0, 1] and len(result.proposals) == 6
    valid = [p for p in result.proposals if p.source != INVALID]
    assert valid, "no proposal decoded to a valid DAG"
    for p in result.proposals:
        if p.source == INVALID:
            assert p.key is None and p.value == pytest.approx(float(data.y.min()))
            continue
        g = DagBatch.from_graphs([(torch.tensor(p.graph[0]).numpy(), p.graph[1])])
        assert bool(is_valid_dag(g)[0]) and g.keys()[0] == p.key
        if p.key in evaluator.table:
            assert p.source == "dataset" and p.value == pytest.approx(evaluator.table[p.key])
        else:
            assert p.source == "surrogate"
    assert result.best.value == max(p.value for p in valid)
    assert set(result.to_dict()) == {"proposals", "best", "counts"}


def test_proposals_outside_the_table_are_unscored_and_counted(trained):
    model, data = trained
    z = model.latent_means(data.graphs)
    evaluator = TableEvaluator.from_dataset(data.subset(range(3)))  # no fallback
    for policy, grows in (("worst", True), ("skip", False)):
        settings = BOSettings(iterations=2, batch_size=3, decode_attempts=10, num_restarts=2, raw_samples=16,
                              mc_samples=16, gp=GP, unscored=policy)
        state = BOState.start(z, data.y, 0)
        result = latent_bo(model, z, data.y, evaluator, is_valid_dag, settings, state=state)
        counts = result.counts()
        assert sum(counts.values()) == len(result.proposals) == 6
        unscored = [p for p in result.proposals if p.source == "unscored"]
        assert counts["unscored"] == len(unscored)
        for p in result.proposals:
            if p.source == "unscored":
                assert p.value is None and p.key not in evaluator.table and not p.scored
            elif p.source == "dataset":
                assert p.value == pytest.approx(evaluator.table[p.key]) and p.scored
        scored = [p for p in result.proposals if p.scored]
        assert result.best is (max(scored, key=lambda p: p.value) if scored else None)
        # "worst" adds every proposal to the GP data, "skip" leaves the unscored ones out
        expected = len(z) + 6 - (0 if grows else len(unscored))
        assert len(state.x) == len(state.y) == expected
        assert result.to_dict()["counts"] == counts
    assert unscored, "the tiny model decoded only table architectures; the test needs some outside it"


def test_bo_settings_validation():
    with pytest.raises(ConfigError, match="batch_size"):
        BOSettings(batch_size=0)
    with pytest.raises(ConfigError, match="acquisition"):
        BOSettings(acquisition="UCB")
    with pytest.raises(ConfigError, match="unscored"):
        BOSettings(unscored="surrogate")
