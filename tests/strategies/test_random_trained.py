"""``random-trained``: prior architectures trained briefly, the best on validation; resumable."""

from __future__ import annotations

import json

import pytest
from tiny_hybrid import COSTS, HYBRID as TINY_HYBRID, hybrid_macs

from attnas import pipeline
from attnas.strategies import trained_candidates as random_trained

RECIPE = {
    "name": "tiny-random-trained",
    "seed": 2,
    "task": {"name": "node-classification", "dataset": "digits-graph"},
    "space": {"name": "autoattend", "layers": 2, "hidden": 16, "pool": "pyg", "stem": "raw", "head": "none",
              "context": "fc", "heads": 2, "dropout": 0.5},
    "strategy": {"name": "random-trained", "samples": 3, "train": {"epochs": 3, "patience": 0, "lr": 0.01}},
    "retrain": {"epochs": 3, "patience": 0, "init": "scratch"},
}


def _events(run):
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("rt") / "ref"
    pipeline.search(RECIPE, out=out)
    return out


def test_the_best_validation_candidate_is_kept_and_test_is_not_read(reference):
    scored = [e for e in _events(reference) if e["phase"] == "random-trained"]
    assert [e["candidate"] for e in scored] == [0, 1, 2]
    assert len({json.dumps(e["arch"], sort_keys=True) for e in scored}) == 3  # distinct
    assert all(e["epochs"] == 3 for e in scored) and all("test_accuracy" not in e for e in scored)
    best = max(scored, key=lambda e: e["val_accuracy"])
    assert json.loads((reference / "arch.json").read_text())["choices"] == best["arch"]
    metrics = json.loads((reference / "metrics.json").read_text())
    assert metrics["random_samples"] == 3 and metrics["random_best_val_accuracy"] == best["val_accuracy"]


def test_no_candidate_is_scored_on_the_test_split(tmp_path, monkeypatch):
    splits = []
    original = random_trained.fit

    def recording_fit(model, task, cfg, **kwargs):
        evaluate = task.evaluate
        monkeypatch.setattr(task, "evaluate", lambda m, split, **kw: (splits.append(split), evaluate(m, split, **kw))[1])
        try:
            return original(model, task, cfg, **kwargs)
        finally:
            monkeypatch.setattr(task, "evaluate", evaluate)

    monkeypatch.setattr(random_trained, "fit", recording_fit)
    pipeline.search({**RECIPE, "strategy": {**RECIPE["strategy"], "samples": 2}}, out=tmp_path / "run")
    assert splits and set(splits) == {"val"}


def test_a_search_stopped_between_candidates_resumes_to_the_same_result(reference, tmp_path, monkeypatch):
    out = tmp_path / "run"
    real, calls = random_trained.fit, []

    def fit(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(random_trained, "fit", fit)
    with pytest.raises(KeyboardInterrupt):
        pipeline.search(RECIPE, out=out)
    monkeypatch.undo()
    pipeline.resume(out)
    assert [e["candidate"] for e in _events(out) if e["phase"] == "random-trained"] == [0, 1, 2]
    for name in ("arch.json",):
        assert json.loads((out / name).read_text()) == json.loads((reference / name).read_text())
    got, want = (json.loads((r / "metrics.json").read_text()) for r in (out, reference))
    assert got["test_accuracy"] == want["test_accuracy"] and got["random_best_val_accuracy"] == want["random_best_val_accuracy"]


HYBRID = {**TINY_HYBRID, "strategy": {
    "name": "random-trained", "samples": 3, "train": {"epochs": 1, "patience": 0},
    "objectives": ["val_accuracy", "macs"], "constraints": {"macs": 1.0}, "costs": COSTS}}


def test_hybrid_search_trains_only_candidates_within_the_limit_and_writes_their_front(tmp_path):
    macs = {m: hybrid_macs()[m, m] for m in ("softmax", "linear")}
    limit = (macs["softmax"] + macs["linear"]) / 2  # linear in both layers is over it, softmax in both within
    recipe = {**HYBRID, "strategy": {**HYBRID["strategy"], "constraints": {"macs": limit}}}
    out = tmp_path / "run"
    pipeline.search(recipe, out=out)
    events = _events(out)
    trained = [e for e in events if e["phase"] == "random-trained"]
    rejected = [e for e in events if e["phase"] == "rejected"]
    assert len(trained) == 3 and rejected  # some drawn hybrids were over the limit and never trained
    assert all(e["costs"]["macs"] <= limit for e in trained) and all(e["costs"]["macs"] > limit for e in rejected)
    assert all(e["arch"]["mechanism"] != ["linear", "linear"] for e in trained)
    front = json.loads((out / "pareto.json").read_text())
    assert front["objectives"] == ["val_accuracy", "macs"] and front["constraints"] == {"macs": limit}
    assert front["measured"]["input"]["tokens"][:2] == [2, 128]  # costs at the longer length
    points = [(e["val_accuracy"], e["costs"]["macs"]) for e in trained]
    for m in front["members"]:  # no trained candidate dominates a front member
        v, c = m["objectives"]["val_accuracy"], m["objectives"]["macs"]
        assert not any(a >= v and b <= c and (a, b) != (v, c) for a, b in points)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["rejected"] == len({json.dumps(e["arch"]) for e in rejected}) and metrics["macs"] <= limit
    with pytest.raises(Exception, match=r"strategy.constraints: only 0 of the .* distinct architectures drawn meet"):
        pipeline.search({**HYBRID, "strategy": {**HYBRID["strategy"], "constraints": {"macs": 1.0}}},
                        out=tmp_path / "infeasible")
    assert not (tmp_path / "infeasible").exists()
