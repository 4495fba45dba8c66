"""docs/results/mqar/drop_signal.py: re-scoring a finished mechanism search in accuracy and in loss."""

from __future__ import annotations

import json
import sys

import pytest

from attnas import pipeline

TASK = {"name": "mqar", "vocab_size": 32, "seq_len": 16, "num_pairs": 2, "train_size": 48, "val_size": 24,
        "test_size": 24, "batch_size": 16}
SPACE = {"name": "attention-mechanisms", "candidates": ["softmax", "local"], "dim": 16, "depth": 1, "heads": 2,
         "ffn_dim": 16, "supernet_depth": 2, "mechanism_options": {"local": {"window": 4}}}
RETRAIN = {"epochs": 1, "patience": 0, "batch_size": 16}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("drop-signal")
    search = {"name": "tiny-mqar", "seed": 0, "task": TASK, "space": SPACE, "retrain": RETRAIN,
              "strategy": {"name": "mechanism-search", "supernet": {"epochs": 2, "patience": 0, "batch_size": 16}}}
    pipeline.search(search, out=root / "search")
    for mech in SPACE["candidates"]:
        fixed = {**search, "strategy": {"name": "fixed", "arch": {"mechanism": mech}}}
        pipeline.search(fixed, out=root / "alone" / mech)
    return root


def test_accuracy_drops_reproduce_the_searchs_own_scores(runs):
    from docs.results.mqar.drop_signal import drop_scores

    scores = drop_scores(str(runs / "search"))
    logged = json.loads((runs / "search" / "metrics.json").read_text())
    for mech in SPACE["candidates"]:
        assert scores["accuracy"][mech] == pytest.approx(logged[f"drop_score_{mech}"], abs=1e-9)
        assert scores["loss"][mech] == scores["loss"][mech]  # a number, not NaN
        assert 0 <= scores["kept_alone"][mech] <= 1
    assert 0 <= scores["base"]["accuracy"] <= 1 and scores["base"]["loss"] > 0


@pytest.mark.filterwarnings("ignore:An input array is constant")  # two tiny models may tie
def test_main_ranks_both_signals_against_the_runs_trained_alone(runs, monkeypatch, capsys, tmp_path):
    from docs.results.mqar import drop_signal

    out = tmp_path / "scores.json"
    monkeypatch.setattr(sys, "argv", ["drop_signal", str(runs / "search"), "--alone", str(runs / "alone"),
                                      "--json", str(out)])
    drop_signal.main()
    text = capsys.readouterr().out
    assert "2 mechanisms measured alone" in text
    assert "accuracy: rho" in text and "loss: rho" in text and "kept_alone: rho" in text
    saved = json.loads(out.read_text())
    assert set(saved["alone"]) == {"softmax", "local"} and len(saved["runs"]) == 1


def test_a_folder_without_finished_runs_is_refused(tmp_path):
    from docs.results.mqar.drop_signal import alone_accuracy

    with pytest.raises(SystemExit, match="no finished run"):
        alone_accuracy(tmp_path)
