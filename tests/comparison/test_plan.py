"""The rows of attnas compare: every shipped searching recipe plans valid rows."""

from __future__ import annotations

import pytest

from attnas import _registry
from attnas.arch import Arch
from attnas.build import build_space
from attnas.comparison.plan import plan_rows
from attnas.config import check_seeds, list_recipes, load_config
from attnas.errors import ConfigError, UnsupportedError
from attnas.spaces.autoattend import AutoAttendSpace


def _searching(name: str) -> bool:
    cfg = load_config(name)
    return cfg.strategy.name != "fixed" and _registry.get("strategy", cfg.strategy.name).final_training


SEARCHING = [r for r in list_recipes() if _searching(r)]


@pytest.mark.parametrize("recipe", SEARCHING)
def test_every_searching_recipe_plans_rows_whose_architectures_are_valid(recipe):
    config, rows = plan_rows(recipe)
    assert rows[0].name == "search" and rows[0].recipe == config.to_dict()
    assert {r.kind for r in rows} >= {"search", "baseline"}
    for row in rows:
        cfg = load_config(row.recipe)
        assert cfg.task == config.task and cfg.seed == config.seed
        assert {k: v for k, v in cfg.retrain.__dict__.items() if k != "init"} == \
            {k: v for k, v in config.retrain.__dict__.items() if k != "init"}
        if row.kind == "baseline" or cfg.strategy.name == "fixed":
            space = build_space(cfg)
            space.validate(Arch(space.name, dict(cfg.strategy.options.arch)))
            assert cfg.retrain.init == "scratch"


def test_random_row_of_evolution_scores_as_many_architectures_with_the_same_supernet():
    config, rows = plan_rows("autoattend-cora-quick")
    random_row = next(r for r in rows if r.name == "random")
    ev = config.strategy.options.evolution
    assert random_row.recipe["strategy"]["name"] == "one-shot-random"
    assert random_row.recipe["strategy"]["samples"] == ev.population + ev.rounds * ev.children
    assert random_row.recipe["strategy"]["supernet"] == config.to_dict()["strategy"]["supernet"]
    assert random_row.recipe["strategy"]["rerank"] == config.to_dict()["strategy"]["rerank"]
    assert random_row.recipe["retrain"] == config.to_dict()["retrain"]


def test_random_search_recipe_has_no_random_row_and_baselines_can_be_chosen():
    _, rows = plan_rows("autoattend-cora-random", baselines=["gat"])
    assert [r.name for r in rows] == ["search", "gat"]
    _, rows = plan_rows("autoattend-cora-quick", random=False, overrides=["compare.baselines=[gcn]"])
    assert [r.name for r in rows] == ["search", "gcn"]


def test_darts_random_row_is_one_draw_from_the_prior_trained_from_scratch():
    _, rows = plan_rows("autola-digits-quick")
    row = next(r for r in rows if r.name == "random")
    assert row.recipe["strategy"]["name"] == "fixed" and row.recipe["retrain"]["init"] == "scratch"
    assert [r.name for r in rows][2:] == ["plain", "se", "cbam", "hog_se", "hog_cbam"]


def test_bad_requests_are_refused_naming_the_problem(monkeypatch):
    with pytest.raises(ConfigError, match="unknown baseline.*'gin'.*gcn, gat|gin"):
        plan_rows("autoattend-cora-quick", baselines=["gin"])
    with pytest.raises(UnsupportedError, match="fixed architecture"):
        plan_rows("gat-cora")
    with pytest.raises(UnsupportedError, match="trains no architecture"):
        plan_rows("opemb-enas-quick")
    monkeypatch.setattr(AutoAttendSpace, "baselines", lambda self: {})
    with pytest.raises(UnsupportedError, match="declares no hand-designed baselines"):
        plan_rows("autoattend-cora-quick")
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(ConfigError, match="--seeds"):
            check_seeds(bad)
