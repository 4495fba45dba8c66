"""One-shot strategies: budgets, uniqueness, re-ranking, random search, refusal."""

from __future__ import annotations

import json

import pytest
import torch

from attnas import pipeline
from attnas.core.errors import UnsupportedError


def test_evolution_evaluates_the_budget_of_distinct_architectures(tiny_recipe, tmp_path):
    run = pipeline.search(tiny_recipe, ["strategy.supernet.epochs=5"], out=tmp_path / "run")
    events = run.events("evolution")
    assert len(events) == 30 + 3 * 6
    keys = {json.dumps(e["arch"], sort_keys=True) for e in events}
    assert len(keys) == len(events)
    stages = [e["stage"] for e in events]
    assert stages == [0] * 30 + [1] * 6 + [2] * 6 + [3] * 6
    # each later stage mutates architectures of the best of the population so far
    reranked = run.events("rerank")
    assert len(reranked) == 3
    scores = sorted((e["accuracy"] for e in events), reverse=True)[:3]
    assert sorted(e["supernet_score"] for e in reranked) == sorted(scores)
    arch = json.loads(run.file("arch.json").read_text())["choices"]
    best_rerank = max(reranked, key=lambda e: e["val"])
    assert arch == best_rerank["arch"]
    # the report shows the supernet's scores of the re-ranked candidates beside their re-ranked scores
    from attnas.reporting.report import write_report

    report = write_report(run.path).read_text()
    assert "## Re-ranking" in report and "Kendall's tau between the two orders" in report
    table = [line for line in report.splitlines() if line.startswith("| ") and "`L1=" in line]
    assert len(table) == 3 and sum("**(chosen)**" in line for line in table) == 1
    assert f"{best_rerank['val']:.4f} |" in next(line for line in table if "**(chosen)**" in line)
    assert (run.path / "rerank.png").exists()


def test_without_re_ranking_the_best_supernet_score_wins_and_the_report_lists_the_runners_up(tiny_recipe, tmp_path):
    from attnas.reporting.report import write_report

    run = pipeline.search(tiny_recipe, ["strategy.supernet.epochs=5", "strategy.rerank.epochs=0"],
                          out=tmp_path / "run")
    assert run.events("rerank") == []
    scored = run.events("evolution")
    best = max(scored, key=lambda e: e["accuracy"])  # the first of any tie, as the search keeps it
    assert json.loads(run.file("arch.json").read_text())["choices"] == best["arch"]
    report = write_report(run.path).read_text()
    assert "## Best candidates" in report and "## Re-ranking" not in report
    section = report.split("## Best candidates")[1].split("\n## ")[0]
    table = [line for line in section.splitlines() if line.startswith("| ") and "`L1=" in line]
    assert len(table) == 3  # the tiny recipe's rerank.top_k
    assert "**(chosen)**" in table[0] and sum("**(chosen)**" in line for line in table) == 1
    scores = [float(line.rsplit("|", 2)[1]) for line in table]
    assert scores == sorted(scores, reverse=True) and scores[0] == pytest.approx(best["accuracy"], abs=1e-4)


def test_rerank_averages_the_validation_of_several_seeds_with_early_stopping(tiny_recipe, tmp_path):
    run = pipeline.search(tiny_recipe, ["strategy.supernet.epochs=5", "strategy.rerank.epochs=40",
                                        "strategy.rerank.patience=2", "strategy.rerank.seeds=2"],
                          out=tmp_path / "run")
    reranked = run.events("rerank")
    assert len(reranked) == 3
    for e in reranked:
        assert len(e["vals"]) == 2 and e["val"] == pytest.approx(sum(e["vals"]) / 2)
    # the two seeds are different fine-tunings, and early stopping ended some before 40 epochs
    assert any(e["vals"][0] != e["vals"][1] for e in reranked)
    assert all(len(e["epochs"]) == 2 for e in reranked) and min(min(e["epochs"]) for e in reranked) < 40
    arch = json.loads(run.file("arch.json").read_text())["choices"]
    assert arch == max(reranked, key=lambda e: e["val"])["arch"]
    assert run.read_json("metrics.json")["rerank_val"] == max(e["val"] for e in reranked)


def test_rerank_seeds_must_be_positive(tiny_recipe, tmp_path):
    from attnas.core.errors import ConfigError

    with pytest.raises(ConfigError, match="rerank.seeds"):
        pipeline.search(tiny_recipe, ["strategy.rerank.seeds=0"], out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_random_search_same_budget(tmp_path, tiny_recipe_data):
    recipe = dict(tiny_recipe_data, strategy={"name": "one-shot-random", "samples": 20,
                                                "supernet": {"epochs": 5}, "rerank": {"epochs": 0}})
    run = pipeline.search(recipe, out=tmp_path / "run")
    events = run.events("evolution")
    assert len(events) == 20 and {e["stage"] for e in events} == {0}
    best = max(events, key=lambda e: e["accuracy"])
    assert json.loads(run.file("arch.json").read_text())["choices"] == best["arch"]


def test_fixed_strategy_and_refusal(tmp_path):
    run = pipeline.search("gcn-cora", ["retrain.epochs=5", "task.dataset=digits-graph"], out=tmp_path / "gcn")
    assert json.loads(run.file("arch.json").read_text())["choices"] == {"model": "gcn"}
    from attnas.config import read_yaml, recipe_path

    recipe = read_yaml(recipe_path("gcn-cora"))
    recipe["strategy"] = {"name": "one-shot-evolution"}
    recipe["task"]["dataset"] = "digits-graph"
    with pytest.raises(UnsupportedError, match="needs a space with 'one-shot' support"):
        pipeline.search(recipe, out=tmp_path / "x")
    assert not (tmp_path / "x" / "config.yaml").exists()  # refused before anything was written


def test_candidates_scored_in_threads_equal_one_at_a_time(tmp_path, tiny_recipe_data):
    """``score_threads: 2`` scores two candidates at a time, each with one torch thread:
    the same scores as one at a time with one torch thread (the whole run on one torch
    thread, so that both supernets are trained bit for bit alike)."""
    import torch

    recipe = dict(tiny_recipe_data, strategy={"name": "one-shot-random", "samples": 16,
                                                "supernet": {"epochs": 5}, "rerank": {"epochs": 0}})
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        serial = pipeline.search(recipe, ["strategy.score_threads=1"], out=tmp_path / "serial")
        threaded = pipeline.search(recipe, ["strategy.score_threads=2"], out=tmp_path / "threaded")
    finally:
        torch.set_num_threads(before)
    pairs = [[(e["arch"], e["accuracy"]) for e in r.events("evolution")] for r in (serial, threaded)]
    assert len(pairs[0]) == 16 and pairs[0] == pairs[1]


def test_bad_score_threads_is_a_config_error(tmp_path, tiny_recipe_data):
    from attnas.core.errors import ConfigError

    with pytest.raises(ConfigError, match="score_threads"):
        pipeline.search(tiny_recipe_data, ["strategy.score_threads=0"], out=tmp_path / "run")
    assert not (tmp_path / "run").exists()



def test_context_warmup_is_a_fraction_of_the_epochs(tiny_recipe_data, tmp_path):
    from attnas.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"strategy.supernet.context_warmup: must be in \[0, 1\), got 1.0"):
        pipeline.search(tiny_recipe_data, ["strategy.supernet.context_warmup=1.0"], out=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def _supernet_weights(tiny_recipe_data, tmp_path, name, **supernet):
    """The scoring supernet's weights of a seconds-long search (supernet options ``supernet``)."""
    data = dict(tiny_recipe_data)
    data["strategy"] = dict(data["strategy"], supernet={"checkpoint_every": 50, **supernet},
                            evolution={"population": 4, "parents": 2, "children": 2, "rounds": 1},
                            rerank={"top_k": 1, "epochs": 0})
    data["retrain"] = dict(data["retrain"], epochs=1)
    run = pipeline.search(data, [], out=tmp_path / name)
    return run.load_checkpoint("supernet")["state"]["model"]


def test_supernet_average_is_the_mean_of_the_weights_after_the_last_epochs(tiny_recipe_data, tmp_path):
    """``strategy.supernet.average=0.2`` of 10 epochs scores with the mean of the weights after
    epochs 9 and 10, which shorter runs without averaging end with."""
    last = _supernet_weights(tiny_recipe_data, tmp_path, "ten", epochs=10)
    before = _supernet_weights(tiny_recipe_data, tmp_path, "nine", epochs=9)
    averaged = _supernet_weights(tiny_recipe_data, tmp_path, "avg", epochs=10, average=0.2)
    assert any(not torch.equal(v, before[k]) for k, v in last.items())  # the tenth epoch moved weights
    for k, v in last.items():
        if v.is_floating_point():
            torch.testing.assert_close(averaged[k], (v + before[k]) / 2)
        else:
            assert torch.equal(averaged[k], v), k


def test_supernet_average_may_not_overlap_the_context_warmup(tiny_recipe_data, tmp_path):
    from attnas.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"strategy.supernet.average: .*overlap the context warm-up"):
        pipeline.search(tiny_recipe_data, ["strategy.supernet.context_warmup=0.5", "strategy.supernet.average=0.6"],
                        out=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
