"""Cost-aware one-shot search: constraints, the Pareto front, export, and a killed search resumed."""

from __future__ import annotations

import copy
import json
import signal

import numpy as np
import pytest

from attnas import pipeline
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError

pytest.importorskip("pymoo")


def _small(recipe: dict, **strategy) -> dict:
    """The tiny digits recipe, smaller still: a cost-aware search of a few seconds."""
    recipe = copy.deepcopy(recipe)
    recipe["strategy"].update(supernet={"epochs": 6, "checkpoint_every": 3},
                              rerank={"top_k": 2, "epochs": 1}, **strategy)
    recipe["retrain"].update(epochs=2)
    return recipe


def _params(space, task, choices) -> int:
    return sum(p.numel() for p in space.build(Arch(space.name, choices), task).parameters())


def _front(points: list[tuple[float, float]]) -> list[int]:
    """Brute force: indices of the points (accuracy up, params down) no other point dominates."""
    def dom(a, b):
        return a[0] >= b[0] and a[1] <= b[1] and (a[0] > b[0] or a[1] < b[1])
    return [i for i, p in enumerate(points) if not any(dom(q, p) for j, q in enumerate(points) if j != i)]


def test_constraints_never_admit_a_violating_candidate(tmp_path, tiny_recipe_data):
    limit = 2600  # about half of the tiny space's architectures are over it
    recipe = _small(tiny_recipe_data, constraints={"params": limit})
    run = pipeline.search(recipe, out=tmp_path / "run")
    from attnas.runs.build import build_space, build_task, pick_device
    from attnas.config import load_config
    from attnas.data.root import resolve_data_root

    cfg = load_config(recipe)
    space, task = build_space(cfg), build_task(cfg, resolve_data_root(), pick_device("cpu"))
    scored, rejected = run.events("evolution"), run.events("rejected")
    assert len(scored) == 30 + 3 * 6 and rejected  # the budget is kept: rejected ones were replaced
    for ev in scored:  # every scored candidate meets the limit, counted again from its network
        assert ev["costs"]["params"] <= limit
        assert _params(space, task, ev["arch"]) == ev["costs"]["params"]
    for ev in rejected:
        assert ev["costs"]["params"] > limit and ev["over"] == ["params"]
        assert _params(space, task, ev["arch"]) > limit
    assert not {json.dumps(e["arch"], sort_keys=True) for e in rejected} & {
        json.dumps(e["arch"], sort_keys=True) for e in scored}
    metrics = run.read_json("metrics.json")
    assert metrics["params"] <= limit and metrics["rejected"] == len(rejected)
    assert not run.exists("pareto.json")  # one objective: no front


def test_too_few_feasible_architectures_is_a_clear_error(tmp_path, tiny_recipe_data):
    recipe = _small(tiny_recipe_data, constraints={"params": 10})
    recipe["strategy"]["evolution"]["population"] = 4
    with pytest.raises(ConfigError, match=r"strategy.constraints: only 0 of the \d+ distinct architectures drawn "
                                          r"meet params <= 10, 4 were needed"):
        pipeline.search(recipe, out=tmp_path / "run")


def test_an_objective_naming_another_metric_is_refused_before_anything_is_written(tmp_path, tiny_recipe_data):
    recipe = _small(tiny_recipe_data, objectives=["val_micro_f1", "params"])
    with pytest.raises(ConfigError, match=r"'val_micro_f1' is not this task's validation metric; use 'val_accuracy'"):
        pipeline.search(recipe, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_front_is_the_non_dominated_set_of_the_scored_candidates(tmp_path, tiny_recipe_data):
    recipe = _small(tiny_recipe_data, objectives=["val_accuracy", "params"], constraints={"params": 3000})
    run = pipeline.search(recipe, out=tmp_path / "run")
    scored = run.events("evolution")
    points = [(e["accuracy"], e["costs"]["params"]) for e in scored]
    expected = sorted(json.dumps(scored[i]["arch"], sort_keys=True) for i in _front(points))
    doc = run.read_json("pareto.json")
    assert doc["objectives"] == ["val_accuracy", "params"] and doc["directions"] == ["max", "min"]
    assert doc["constraints"] == {"params": 3000.0} and doc["measured"]["device"] == "cpu"
    members = doc["members"]
    assert sorted(json.dumps(m["arch"]["choices"], sort_keys=True) for m in members) == expected
    assert [m["index"] for m in members] == list(range(len(members)))
    accs = [m["objectives"]["val_accuracy"] for m in members]
    assert accs == sorted(accs, reverse=True)  # best validation score first
    # the chosen member is the run's arch.json, and it is on the front
    chosen = [m for m in members if m["chosen"]]
    assert len(chosen) == 1
    assert chosen[0]["arch"]["choices"] == json.loads(run.file("arch.json").read_text())["choices"]
    assert run.read_json("metrics.json")["pareto_size"] == len(members)

    # report.md: the front's table (one row per member, the chosen one marked) and pareto.png
    from attnas.reporting.report import write_report

    report = write_report(run.path).read_text()
    section = report[report.index("## Pareto front"):]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) == len(members) and sum("**(chosen)**" in r for r in rows) == 1
    assert f"of {len(scored)} scored candidates" in section and "params <= 3000" in section
    assert (run.path / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # export: by index and by a condition on the values
    from attnas.costs.pareto import export_member

    path, member = export_member(run.path, "1" if len(members) > 1 else "0", tmp_path / "one.json")
    assert json.loads(path.read_text())["choices"] == member["arch"]["choices"]
    smallest = min(m["objectives"]["params"] for m in members)
    _, member = export_member(run.path, f"params<={smallest}", tmp_path / "small.json")
    assert member["objectives"]["params"] == smallest


def test_a_latency_objective_times_each_operation_once_by_default(tmp_path, tiny_recipe_data):
    """``costs.latency: auto`` (the default) times an AutoAttend network by its operations,
    and says so in costs.jsonl, metrics.json, pareto.json and report.md."""
    recipe = _small(tiny_recipe_data, objectives=["val_accuracy", "latency_ms"], costs={"warmup": 0, "repeats": 1})
    run = pipeline.search(recipe, out=tmp_path / "run")
    scored = run.events("evolution")
    assert all(e["costs"]["latency_ms"] > 0 for e in scored)
    rows = [json.loads(line) for line in run.file("costs.jsonl").read_text().splitlines()]
    parts = [r for r in rows if "part" in r]
    archs = [r for r in rows if "costs" in r]
    assert len(archs) == len(scored)  # one row per architecture (its params, and the sum of its parts)
    assert len({json.dumps(r["part"]) for r in parts}) == len(parts) < len(archs)  # each part timed once
    assert {r["latency"] for r in archs} == {"operations"}
    assert run.read_json("metrics.json")["costs_latency"] == "operations"
    front = run.read_json("pareto.json")
    assert front["members"] and front["measured"]["protocol"]["latency"] == "operations"
    from attnas.reporting.report import write_report

    section = write_report(run.path).read_text().split("## Pareto front")[1]
    assert "`latency_ms`: the sum of its parts' timings (`strategy.costs.latency`: operations)" in section


def test_latency_by_operations_is_refused_for_networks_that_do_not_split(tmp_path, tiny_recipe_data, monkeypatch):
    from attnas.models.autoattend_network import AutoAttendModel

    monkeypatch.delattr(AutoAttendModel, "latency_parts")
    recipe = _small(tiny_recipe_data, objectives=["val_accuracy", "latency_ms"], costs={"latency": "operations"})
    with pytest.raises(ConfigError, match=r"strategy.costs.latency: 'operations' needs networks that split"):
        pipeline.search(recipe, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_export_command_and_training_the_export(tmp_path, tiny_recipe_data):
    from attnas_subprocess import run_attnas

    recipe = _small(tiny_recipe_data, objectives=["val_accuracy", "params"])
    run = pipeline.search(recipe, out=tmp_path / "run")
    members = run.read_json("pareto.json")["members"]
    out = run_attnas("export", str(run.path), "--pick", str(len(members) - 1), "--out", str(tmp_path / "p.json"))
    assert "train it: attnas search" in out.stdout
    picked = json.loads((tmp_path / "p.json").read_text())
    assert picked["choices"] == members[-1]["arch"]["choices"]
    bad = run_attnas("export", str(run.path), "--pick", "latency_ms<1", check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown value 'latency_ms'" in bad.stderr
    # the printed command trains the member like a run's final model
    trained = pipeline.search(str(run.file("config.yaml")),
                              [f"strategy={{name: fixed, arch_file: {tmp_path / 'p.json'}}}"], out=tmp_path / "t")
    assert json.loads(trained.file("arch.json").read_text())["choices"] == picked["choices"]
    assert trained.read_json("metrics.json")["params"] == members[-1]["objectives"]["params"]


def _constrained(tiny_recipe_data: dict) -> dict:
    """:func:`_small` with a params limit, a loose latency one, and a population of 12 and 3
    rounds of 4 children (24 scored)."""
    recipe = _small(tiny_recipe_data, objectives=["val_accuracy", "params"],
                    constraints={"params": 2600, "latency_ms": 1e6}, costs={"warmup": 0, "repeats": 1})
    recipe["strategy"]["evolution"].update(population=12, parents=3, children=4)
    return recipe


@pytest.fixture(scope="module")
def constrained_reference(tmp_path_factory, tiny_recipe_data):
    """The uninterrupted constrained search, run once (in this process, on one thread as the killed children)."""
    from attnas_subprocess import search_here

    return search_here(tmp_path_factory.mktemp("ref"), _constrained(tiny_recipe_data), threads=1)


@pytest.mark.parametrize("fault", ["rejected:3", "evolution:18"])
def test_a_killed_constrained_search_resumes_to_the_same_front_reusing_its_costs(tmp_path, constrained_reference,
                                                                                fault):
    """Killed while candidates are drawn (after the 3rd rejection) or scored (in the second
    round), then resumed (in this process: what ``attnas search --resume`` runs).

    Latency is measured (a loose constraint, so the admitted set is the same on every run)
    and cached: the resumed run measures no architecture twice.
    """
    from attnas_subprocess import resume_here, run_attnas

    recipe_path, ref = constrained_reference
    out = tmp_path / "run"
    killed = run_attnas("search", str(recipe_path), "--out", str(out), fault=fault, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (out / "pareto.json").exists()
    before = (out / "costs.jsonl").read_text().splitlines()
    assert before
    resume_here(out, threads=1)
    after = (out / "costs.jsonl").read_text().splitlines()
    assert after[: len(before)] == before  # what was measured before the kill is kept ...
    keys = [json.loads(line)["key"] for line in after]
    assert len(keys) == len(set(keys))  # ... and reused: no architecture measured twice
    fronts = [json.loads((d / "pareto.json").read_text()) for d in (out, ref)]
    strip = [[(m["arch"], m["objectives"], m["chosen"]) for m in f["members"]] for f in fronts]
    assert strip[0] == strip[1] and len(strip[0]) >= 1
    assert json.loads((out / "arch.json").read_text()) == json.loads((ref / "arch.json").read_text())
    m_out, m_ref = (json.loads((d / "metrics.json").read_text()) for d in (out, ref))
    for key in ("val_accuracy", "test_accuracy", "evaluated", "rejected", "pareto_size", "params"):
        assert m_out[key] == m_ref[key], key
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["index"] for e in events if e["phase"] == "evolution"] == list(range(24))
    rejected = [json.dumps(e["arch"], sort_keys=True) for e in events if e["phase"] == "rejected"]
    assert len(rejected) == len(set(rejected)) == m_ref["rejected"]  # no rejection logged twice
    rows = [json.loads(line) for line in after]
    assert np.all([r["costs"]["latency_ms"] > 0 for r in rows if "costs" in r])
    # latency "auto": timed by operations before the kill and after it, each part once
    assert {r["latency"] for r in rows if "costs" in r} == {"operations"}
    parts = [json.dumps(r["part"]) for r in rows if "part" in r]
    assert parts and len(parts) == len(set(parts))


def test_a_feasibility_check_cut_short_by_the_clock_refuses_nothing(tmp_path, tiny_recipe_data, monkeypatch):
    """Latency timed on a busy machine can stop the check after a few draws: that shows nothing,
    so the recipe is not refused there; the search's own draws still end with a clear error."""
    from attnas.strategies import one_shot_costs

    recipe = _small(tiny_recipe_data, constraints={"params": 10})
    recipe["strategy"]["evolution"]["population"] = 4
    monkeypatch.setattr(one_shot_costs, "FEASIBILITY_SECONDS", -1.0)
    with pytest.raises(ConfigError, match=r"only 0 of the \d+ distinct architectures drawn meet params <= 10, "
                                          r"4 were needed; loosen") as caught:
        pipeline.search(recipe, out=tmp_path / "run")
    assert "checked before training" not in str(caught.value)  # the search's draws, not the check, refused it
