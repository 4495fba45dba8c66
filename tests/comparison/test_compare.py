"""attnas compare end to end on a tiny graph: resumable, same result, one-line errors."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from attnas.cli import app
from attnas.comparison import runner
from attnas.comparison.plan import plan_rows
from attnas.comparison.runner import compare
from attnas.reporting.report import write_report
from attnas.training import retraining

TINY = ["strategy.supernet.epochs=6", "strategy.supernet.checkpoint_every=3", "strategy.evolution.population=4",
        "strategy.evolution.parents=2", "strategy.evolution.children=2", "strategy.evolution.rounds=1",
        "strategy.rerank.top_k=2", "strategy.rerank.epochs=1", "retrain.epochs=4", "retrain.patience=0"]
ARGS = dict(recipe="autoattend-digits-quick", overrides=TINY, seeds=2, baselines=["gcn"], random=False, search_seeds=1)
TIMES = ("search_seconds", "train_seconds")


def _without_times(result: dict) -> dict:
    return {**result, "rows": [{k: v for k, v in r.items() if k not in TIMES} for r in result["rows"]]}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "ref"
    return out, compare(**ARGS, out=out)


def test_compare_writes_paired_rows_verdicts_and_a_figure(reference):
    out, result = reference
    assert [r["name"] for r in result["rows"]] == ["search", "gcn"]
    for r in result["rows"]:
        assert len(r["test_per_seed"]) == 2 and r["test"]["n"] == 2
        assert (out / r["name"] / "retrain").is_dir() and (out / r["name"] / "model.pt").exists()
    search = result["rows"][0]
    per_seed = json.loads((out / "search" / "retrain" / "digits-graph" / "supernet" / "summary.json").read_text())
    assert search["test_per_seed"] == [s["test_accuracy"] for s in per_seed["per_seed"]]
    assert result["verdicts"][0]["a"] == "search" and result["verdicts"][0]["b"] == "gcn"
    assert json.loads((out / "compare.json").read_text()) == json.loads(json.dumps(result))
    text = (out / "compare.md").read_text()
    assert "| search |" in text and "| gcn |" in text and result["verdicts"][0]["sentence"] in text
    assert (out / "compare.png").stat().st_size > 1000
    report = write_report(out)
    assert report.name == "report.md" and result["verdicts"][0]["sentence"] in report.read_text()


@pytest.mark.parametrize("kill_at", ["between rows", "mid retraining"])
def test_a_killed_comparison_resumes_to_the_same_result(reference, tmp_path, monkeypatch, kill_at):
    _, expected = reference
    out = tmp_path / "cmp"
    if kill_at == "between rows":
        real = runner.run_row

        def run_row(row, *a, **k):
            if row["name"] == "gcn":
                raise KeyboardInterrupt
            return real(row, *a, **k)

        monkeypatch.setattr(runner, "run_row", run_row)
    else:
        real = retraining._retrain_row
        calls = []

        def retrain_row(*a, **k):
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return real(*a, **k)

        monkeypatch.setattr(retraining, "_retrain_row", retrain_row)
    with pytest.raises(KeyboardInterrupt):
        compare(**ARGS, out=out)
    assert not (out / "compare.json").exists()
    monkeypatch.undo()
    resumed = compare(**ARGS, out=out)
    assert _without_times(resumed) == _without_times(expected)


def test_another_plan_in_the_same_folder_is_refused(reference):
    out, _ = reference
    with pytest.raises(Exception, match="holds another comparison"):
        compare(**{**ARGS, "seeds": 3}, out=out)


def test_a_row_added_to_a_finished_comparison_runs_alone_and_keeps_the_others(reference, tmp_path, monkeypatch):
    src, expected = reference
    out = tmp_path / "cmp"
    shutil.copytree(src, out)
    searched = runner.pipeline.search_or_resume
    ran = []

    def search_or_resume(run_dir, *a, **k):
        if not (Path(run_dir) / "model.pt").exists():
            ran.append(Path(run_dir).name)
        return searched(run_dir, *a, **k)

    monkeypatch.setattr(runner.pipeline, "search_or_resume", search_or_resume)
    result = compare(**{**ARGS, "random": True}, out=out)  # the same command without --no-random
    assert ran == ["random"]
    by = {r["name"]: r for r in result["rows"]}
    assert list(by) == ["search", "random", "gcn"]
    for r in expected["rows"]:  # the finished rows' runs and seeds are read, not trained again
        assert by[r["name"]]["test_per_seed"] == r["test_per_seed"] and by[r["name"]]["arch"] == r["arch"]
    assert ("search", "random") in {(v["a"], v["b"]) for v in result["verdicts"]}
    assert [r["name"] for r in json.loads((out / "compare-plan.json").read_text())["rows"]] == list(by)


def test_a_plan_may_only_add_rows_to_a_folder_s_comparison():
    _, rows = plan_rows(ARGS["recipe"], ARGS["overrides"], ["gcn", "gat"])
    plan = json.loads(json.dumps(runner._plan("r", [], 2, rows)))
    fewer = {**plan, "rows": [r for r in plan["rows"] if r["name"] != "random"]}
    assert runner.plan_change(plan, plan) is None
    assert runner.plan_change(fewer, plan) is None  # rows added
    assert runner.plan_change(plan, fewer) == "its row 'random' is not in this comparison"
    assert runner.plan_change(plan, {**plan, "seeds": 3}) == "its compare-plan.json has another seeds"
    changed = copy.deepcopy(plan)
    changed["rows"][0]["recipe"]["retrain"]["lr"] = 0.5
    assert runner.plan_change(plan, changed) == "its row 'search' differs"
    # a folder written before a setting existed: the setting's default is what it ran with
    older = copy.deepcopy(plan)
    del older["rows"][0]["recipe"]["retrain"]["eval_every"]
    assert runner.plan_change(older, plan) is None
    older["rows"][0]["recipe"]["retrain"]["eval_every"] = 2
    assert runner.plan_change(older, plan) == "its row 'search' differs"


@pytest.mark.parametrize("args, message", [
    (["--baselines", "gin"], "gin"),
    (["--seeds", "0"], "--seeds must be an integer >= 1"),
    (["--set", "retrain.lr=-1"], "retrain.lr"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "cmp"
    res = CliRunner().invoke(app, ["compare", "autoattend-digits-quick", "--out", str(out), *args])
    assert res.exit_code == 2
    assert message in res.output and len(res.output.strip().splitlines()) == 1
    assert not out.exists()


def test_a_recipe_that_does_not_search_is_refused(tmp_path):
    out = tmp_path / "cmp"
    res = CliRunner().invoke(app, ["compare", "gat-cora", "--out", str(out)])
    assert res.exit_code == 2 and "fixed architecture" in res.output and not out.exists()


@pytest.mark.xdist_group("ray")  # on the worker of the other Ray tests (tests/scale/test_parallel.py)
def test_rows_and_seeds_on_ray_workers_give_the_same_result(reference, local_ray, tmp_path):
    # (the module's local Ray, started once: the rows' executor and each row's retrain find
    # it running and reuse it and its workers, instead of starting and stopping a Ray 3 times)
    _, expected = reference
    assert _without_times(compare(**ARGS, out=tmp_path / "par", workers=2)) == _without_times(expected)


def test_each_row_states_its_training_protocol_and_the_baseline_its_paper_s(reference):
    from attnas.comparison.report import compare_markdown

    _, result = reference
    by = {r["name"]: r for r in result["rows"]}
    assert by["search"]["train"].startswith("4 ep, adam lr 0.005") and by["search"]["init"] == "supernet"
    assert by["gcn"]["train"] == "1000 ep, adam lr 0.01, wd 0.0005, patience 100" and by["gcn"]["init"] == "scratch"
    text = compare_markdown(result)
    assert "| 1000 ep, adam lr 0.01, wd 0.0005, patience 100 (init scratch) |" in text
    assert "highest mean validation accuracy (`gcn`)" in text
    # two training seeds: the means, but no verdict
    assert result["verdicts"][0]["verdict"] == "no verdict" and "at least 3 seeds" in result["verdicts"][0]["sentence"]


RANDOM_TRAINED = {
    "name": "tiny-random-trained-compare", "seed": 2,
    "task": {"name": "node-classification", "dataset": "digits-graph"},
    "space": {"name": "autoattend", "layers": 1, "hidden": 16, "pool": "pyg", "stem": "raw", "head": "none",
              "context": "fc", "heads": 2, "dropout": 0.5},
    "strategy": {"name": "random-trained", "samples": 2, "train": {"epochs": 2, "patience": 0}},
    "retrain": {"epochs": 3, "patience": 0, "init": "scratch"},
}


def test_search_seeds_pair_the_means_of_independent_searches(tmp_path):
    out = tmp_path / "cmp"
    result = compare(RANDOM_TRAINED, seeds=1, baselines=["gcn"], search_seeds=3, out=out)
    folders = ["search-seed-2", "search-seed-3", "search-seed-4"]
    assert result["search_seeds"] == 3 and result["folders"] == folders
    subs = [json.loads((out / f / "compare.json").read_text()) for f in folders]
    by = {r["name"]: r for r in result["rows"]}
    for name in ("search", "gcn"):
        assert by[name]["test_per_search"] == [next(r for r in s["rows"] if r["name"] == name)["test"]["mean"]
                                               for s in subs]
        assert len(by[name]["test_per_seed"]) == 3  # 3 searches x 1 training seed
    # each search seed is its own search: the recipe's seed 2, 3, 4
    assert [yaml.safe_load((out / f / "search" / "config.yaml").read_text())["seed"] for f in folders] == [2, 3, 4]
    verdict = result["verdicts"][0]
    assert (verdict["a"], verdict["b"], verdict["n"]) == ("search", "gcn", 3) and "search seeds" in verdict["sentence"]
    assert verdict["verdict"] != "no verdict"
    assert result["training_seed_verdicts"][0]["n"] == 3
    text = (out / "compare.md").read_text()
    assert "paired t-test over search seeds" in text and verdict["sentence"] in text
    assert (out / "compare.png").stat().st_size > 1000
    # two searches are too few for a verdict; the same command again reads the finished folders
    two = runner.pool_search_seeds(RANDOM_TRAINED, subs[:2], folders[:2])
    assert two["verdicts"][0]["verdict"] == "no verdict" and "at least 3 search seeds" in two["verdicts"][0]["sentence"]
    again = compare(RANDOM_TRAINED, seeds=1, baselines=["gcn"], search_seeds=3, out=out)
    assert _without_times(again) == _without_times(result)
    with pytest.raises(Exception, match="holds another comparison"):
        compare(RANDOM_TRAINED, seeds=1, baselines=["gcn"], search_seeds=4, out=out)


def test_a_row_still_improving_at_the_end_of_its_budget_is_counted():
    budget = {"epochs": 100}
    seeds = [{"epochs": 100, "best_epoch": 95},   # used it all, best in the last tenth: under-trained
             {"epochs": 100, "best_epoch": 40},   # used it all, flat since epoch 40
             {"epochs": 61, "best_epoch": 11}]    # stopped early by its patience
    assert runner.still_improving(seeds, budget) == 1
    assert runner.still_improving([{"epochs": 100}], budget) is None  # results of older versions


def test_progress_lines_and_notices_name_the_row_and_its_search_seed(tmp_path, monkeypatch, capsys, caplog):
    from attnas.reporting.progress import progress

    def work(*a, **k):  # a search or retraining that shows one progress line
        with progress("supernet training", 1) as bar:
            bar.advance()
        return {}

    monkeypatch.setenv("ATTNAS_PROGRESS", "1")
    monkeypatch.setattr(runner.pipeline, "search_or_resume", work)
    monkeypatch.setattr(runner, "retrain", work)
    caplog.set_level("INFO", logger="attnas")
    row = {"name": "random", "kind": "random", "recipe": {"seed": 7}}
    assert runner.run_row(row, str(tmp_path), None, None) == "random"
    runner._retrain_row(row, tmp_path, 3, tmp_path, None, None, None)
    lines = [line for line in capsys.readouterr().err.splitlines() if "supernet training" in line]
    assert lines == ["compare row random, search seed 7: supernet training: 1/1 "] * 2
    assert [r.getMessage() for r in caplog.records] == ["compare row random, search seed 7: searching",
                                                       "compare row random, search seed 7: retraining with 3 "
                                                       "training seeds"]


def test_a_seed_retrained_on_a_worker_keeps_the_row_label(monkeypatch):
    from attnas.reporting.progress import current_label, labelled

    seen = []
    monkeypatch.setattr(retraining, "worker_cached", lambda key, build: (None, None, None, None))
    monkeypatch.setattr(retraining, "_retrain_row", lambda *a: seen.append(current_label()) or {})
    with labelled("compare row gcn, search seed 3"):
        job = retraining.RetrainJob(SimpleNamespace(key=lambda: "spec"), "run", {"space": "x", "choices": {}}, None,
                                    SimpleNamespace(init="scratch"), 2, current_label())
    monkeypatch.setattr(retraining.Arch, "from_dict", staticmethod(lambda d: d))
    retraining.retrain_seed(1, job)  # as on a worker: outside the driver's block
    assert seen == ["compare row gcn, search seed 3"] and current_label() == ""


def test_compare_md_holds_no_absolute_path_and_no_float32_noise(reference):
    import re

    out, result = reference
    text = (out / "compare.md").read_text()
    assert str(out) not in text and str(out.parent) not in text
    assert not re.search(r"(?<![\w.])/(?:tmp|home|work|root|Users|var)/", text)
    assert not re.search(r"\d\.\d{10,}", text)
    assert re.search(r"\d\.\d{10,}", (out / "compare.json").read_text())  # the file programs read keeps them


def test_search_seconds_are_the_strategy_s_running_time_not_the_wall_time_since_creation(reference, tmp_path):
    out, result = reference
    metrics = json.loads((out / "search" / "metrics.json").read_text())
    assert result["rows"][0]["search_seconds"] == round(metrics["search_seconds"], 2)
    # a run that was stopped for an hour and resumed: the pause is not charged to the search
    from attnas.runs.run_dir import RunDir

    run = tmp_path / "resumed"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"created": 1000.0}))
    (run / "events.jsonl").write_text(json.dumps({"time": 4700.0, "phase": "search-done"}) + "\n")
    assert runner.run_search_seconds(RunDir(run)) == 3700.0  # no metric: wall time since creation
    (run / "metrics.json").write_text(json.dumps({"search_seconds": 43.46}))
    assert runner.run_search_seconds(RunDir(run)) == 43.46
