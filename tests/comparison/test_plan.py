"""The rows of attnas compare: every shipped searching recipe plans valid rows."""

from __future__ import annotations

import pytest

from attnas import registry
from attnas.comparison.plan import plan_rows
from attnas.config import check_seeds, list_recipes, load_config
from attnas.core.arch import Arch
from attnas.core.errors import ConfigError, UnsupportedError
from attnas.runs.build import build_space
from attnas.spaces.autoattend import AutoAttendSpace


def _searching(name: str) -> bool:
    cfg = load_config(name)
    return cfg.strategy.name != "fixed" and registry.get("strategy", cfg.strategy.name).final_training


SEARCHING = [r for r in list_recipes() if _searching(r)]


@pytest.mark.parametrize("recipe", SEARCHING)
def test_every_searching_recipe_plans_rows_whose_architectures_are_valid(recipe):
    config, rows = plan_rows(recipe)
    assert rows[0].name == "search" and rows[0].recipe == config.to_dict()
    assert {r.kind for r in rows} >= {"search", "baseline"}
    declared = build_space(config).baselines()
    for row in rows:
        cfg = load_config(row.recipe)
        assert cfg.task == config.task and cfg.seed == config.seed
        own = declared[row.name].retrain if row.kind == "baseline" else None
        expected = {**config.to_dict()["retrain"], **(own or {})}
        assert {k: v for k, v in row.recipe["retrain"].items() if k != "init"} == \
            {k: v for k, v in expected.items() if k != "init"}
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


def test_darts_random_row_is_random_search_at_the_search_s_epochs_and_one_draw_is_on_request():
    config, rows = plan_rows("autola-digits-quick", random_architecture=True)
    row = next(r for r in rows if r.name == "random")
    strategy = row.recipe["strategy"]
    assert strategy["name"] == "random-trained" and row.recipe["retrain"]["init"] == "scratch"
    epochs = config.strategy.options.epochs
    assert strategy["samples"] == min(8, epochs)
    assert strategy["samples"] * strategy["train"]["epochs"] <= epochs
    assert epochs - strategy["samples"] * strategy["train"]["epochs"] < strategy["samples"]
    # the candidates train with the recipe's optimiser
    assert strategy["train"]["lr"] == config.retrain.lr and strategy["train"]["optimizer"] == config.retrain.optimizer
    one = next(r for r in rows if r.name == "random-architecture")
    assert one.recipe["strategy"]["name"] == "fixed" and one.recipe["retrain"]["init"] == "scratch"
    assert [r.name for r in rows][3:] == ["plain", "se", "cbam", "hog_se", "hog_cbam"]


def test_car_darts_and_mechanism_search_budgets_count_every_phase():
    config, rows = plan_rows("fullattn-digits-quick")
    o = config.strategy.options
    strategy = next(r for r in rows if r.name == "random").recipe["strategy"]
    total = o.epochs + (o.pretext_epochs if o.car else 0)
    assert strategy["name"] == "random-trained" and strategy["samples"] * strategy["train"]["epochs"] <= total
    config, rows = plan_rows("dartformer-listops-quick")
    strategy = next(r for r in rows if r.name == "random").recipe["strategy"]
    assert strategy["samples"] * strategy["train"]["epochs"] <= config.strategy.options.supernet.epochs


def test_graph_baselines_train_with_their_own_papers_protocols():
    _, rows = plan_rows("autoattend-cora-quick", baselines=["gcn", "gat"])
    by = {r.name: r.recipe["retrain"] for r in rows}
    assert by["gcn"]["lr"] == 0.01 and by["gcn"]["epochs"] == 1000 and by["gcn"]["patience"] == 100
    assert by["gat"]["lr"] == 0.005 and by["gat"]["epochs"] == 1000 and by["gat"]["patience"] == 100
    assert by["search"]["epochs"] == load_config("autoattend-cora-quick").retrain.epochs


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


@pytest.mark.parametrize("recipe, overrides", [("dartformer-mqar-quick", []),
                                               ("mechanism-mqar-quick", ["space.layout=per-layer"])])
def test_mechanism_search_random_rows_draw_what_the_search_returns(recipe, overrides):
    """NAS One-shot returns cells of single heads, the homogeneous search one mechanism for
    every layer: the random rows draw from the same set, whatever the recipe's layout."""
    import random

    config, rows = plan_rows(recipe, overrides, random_architecture=True)
    cell = config.strategy.options.mode != "homogeneous"
    heads = config.space.options.heads
    for name in ("random", "random-architecture"):
        cfg = load_config(next(r for r in rows if r.name == name).recipe)
        space = build_space(cfg)
        drawn = (space.sample_distinct(8, random.Random(cfg.seed)) if name == "random"
                 else [Arch(space.name, dict(cfg.strategy.options.arch))])
        for arch in drawn:
            space.validate(arch)
            mechanism = arch.choices["mechanism"]
            if cell:
                assert isinstance(mechanism, dict) and sum(mechanism.values()) == heads, (name, mechanism)
            else:
                assert isinstance(mechanism, str), (name, mechanism)
    search_space = next(r for r in rows if r.name == "search").recipe["space"]
    assert search_space == config.to_dict()["space"]  # the search row keeps the recipe's space
