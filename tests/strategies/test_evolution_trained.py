"""``evolution-trained``: regularized evolution over briefly trained hybrids; constraints, resume, counterpart."""

from __future__ import annotations

import copy
import json

import pytest
from tiny_hybrid import COSTS, HYBRID, hybrid_macs

from attnas import pipeline
from attnas.comparison.plan import plan_rows
from attnas.config import load_config
from attnas.core.errors import ConfigError
from attnas.strategies import trained_candidates

RECIPE = {**HYBRID, "name": "tiny-evolution", "strategy": {
    "name": "evolution-trained", "samples": 5, "population": 2, "sample_size": 2, "train": {"epochs": 1, "patience": 0}}}


def _events(run, phase):
    return [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["phase"] == phase]


def _with(**strategy):
    recipe = copy.deepcopy(RECIPE)
    recipe["strategy"].update(strategy)
    return recipe


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("evo") / "ref"
    pipeline.search(RECIPE, out=out)
    return out


def test_children_mutate_the_tournament_winner_and_beat_the_initial_population(reference):
    scored = _events(reference, "evolution-trained")
    assert [e["candidate"] for e in scored] == [0, 1, 2, 3, 4]
    assert [e["origin"] for e in scored] == ["prior", "prior", "mutation", "mutation", "mutation"]
    assert len({json.dumps(e["arch"]) for e in scored}) == 5  # every trained candidate is new
    for child in scored[2:]:  # one layer changed from the parent, a member alive at the time (population 2)
        parent = scored[child["parent"]]
        assert child["candidate"] - 2 <= child["parent"] < child["candidate"]
        assert sum(a != b for a, b in zip(parent["arch"]["mechanism"], child["arch"]["mechanism"])) == 1
    # the evolution's best trained candidate is a child, above every member of the initial population
    best = max(scored, key=lambda e: e["val_accuracy"])
    assert best["origin"] == "mutation" and best["val_accuracy"] > max(e["val_accuracy"] for e in scored[:2])
    assert json.loads((reference / "arch.json").read_text())["choices"] == best["arch"]
    metrics = json.loads((reference / "metrics.json").read_text())
    assert metrics["evolution_samples"] == 5 and metrics["evolution_best_val_accuracy"] == best["val_accuracy"]


def test_the_initial_population_is_random_searchs_first_candidates(reference, tmp_path):
    recipe = copy.deepcopy(RECIPE)
    recipe["strategy"] = {"name": "random-trained", "samples": 2, "train": RECIPE["strategy"]["train"]}
    pipeline.search(recipe, out=tmp_path / "random")
    random_scored = _events(tmp_path / "random", "random-trained")
    evolution_scored = _events(reference, "evolution-trained")[:2]
    assert [(e["arch"], e["val_accuracy"]) for e in random_scored] == \
           [(e["arch"], e["val_accuracy"]) for e in evolution_scored]  # same draws, same training seeds


def test_a_child_over_the_constraint_is_rejected_before_any_training(tmp_path, monkeypatch):
    macs = hybrid_macs()
    without = max(v for k, v in macs.items() if "linear" not in k)
    assert without < min(v for k, v in macs.items() if "linear" in k)  # a linear layer puts a hybrid over
    trained = []
    real = trained_candidates.fit
    monkeypatch.setattr(trained_candidates, "fit", lambda m, *a, **k: (trained.append(m), real(m, *a, **k))[1])
    out = tmp_path / "run"
    assert without == macs["local", "local"]  # the limit: 1.0 x local's in both layers, measured by the search
    pipeline.search(_with(samples=4, constraints={"macs": 1.0}, relative_to={"mechanism": ["local", "local"]},
                          costs=COSTS), out=out)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    for e in (e for e in events if e["phase"] in ("evolution-trained", "rejected")):  # measured beside local's
        assert e["relative"]["macs"] == e["costs"]["macs"] / without
    assert json.loads((out / "metrics.json").read_text())["relative_macs"] <= 1.0
    scored = [e for e in events if e["phase"] == "evolution-trained"]
    assert len(scored) == 4 and len(trained) == 4  # only the feasible ones were trained
    assert all("linear" not in e["arch"]["mechanism"] and e["costs"]["macs"] <= without for e in scored)
    population_done = [e.get("origin") for e in events].index("mutation") - 1
    rejected_children = [e for e in events[population_done:] if e["phase"] == "rejected"]
    assert rejected_children and all("linear" in e["arch"]["mechanism"] for e in rejected_children)


def test_a_search_killed_between_candidates_resumes_to_the_same_result(reference, tmp_path, monkeypatch):
    out = tmp_path / "run"
    real, calls = trained_candidates.fit, []

    def fit(*a, **k):
        calls.append(1)
        if len(calls) == 4:  # in the evolution, after one child
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(trained_candidates, "fit", fit)
    with pytest.raises(KeyboardInterrupt):
        pipeline.search(RECIPE, out=out)
    monkeypatch.undo()
    pipeline.resume(out)
    got, want = (_events(r, "evolution-trained") for r in (out, reference))
    assert [{k: v for k, v in e.items() if k != "time"} for e in got] == \
           [{k: v for k, v in e.items() if k != "time"} for e in want]
    assert json.loads((out / "arch.json").read_text()) == json.loads((reference / "arch.json").read_text())


def test_the_random_counterpart_trains_as_many_candidates_the_same_way():
    recipe = _with(samples=6, population=3, train={"epochs": 2, "patience": 0, "lr": 0.003},
                   objectives=["val_accuracy", "macs"], constraints={"macs": 1e9}, costs=COSTS)
    config, rows = plan_rows(recipe, baselines=["softmax"])
    search, random = (load_config(r.recipe).strategy.options for r in rows[:2])
    assert rows[1].name == "random" and load_config(rows[1].recipe).strategy.name == "random-trained"
    assert random.samples == search.samples == 6 and random.train == search.train
    assert (random.objectives, random.constraints, random.costs) == (search.objectives, search.constraints,
                                                                      search.costs)


@pytest.mark.parametrize("strategy, message", [
    ({"population": 6}, r"^strategy.population: 6 is more than strategy.samples \(5\)"),
    ({"sample_size": 3}, r"^strategy.sample_size: 3 is more than strategy.population \(2\)"),
    ({"relative_to": {"mechanism": "softmax"}}, r"^strategy.relative_to: .* strategy.constraints is not set"),
    ({"relative_to": {"mechanism": "nope"}, "constraints": {"macs": 0.5}}, r"^strategy.relative_to: .*'nope'"),
])
def test_a_bad_option_is_one_line_before_anything_is_written(tmp_path, strategy, message):
    with pytest.raises(ConfigError, match=message) as err:
        pipeline.search(_with(**strategy), out=tmp_path / "run")
    assert "\n" not in str(err.value) and not (tmp_path / "run").exists()


def test_a_space_that_cannot_mutate_is_refused():
    from attnas.core.errors import UnsupportedError
    from attnas.spaces.base import Space
    from attnas.strategies.evolution_trained import EvolutionTrained

    class Unmutable(Space):
        name = "unmutable"

    with pytest.raises(UnsupportedError, match="has no mutate"):
        EvolutionTrained.check(EvolutionTrained.Config(), Unmutable())
