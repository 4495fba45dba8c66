"""The heterophily recipes: the quick comparison runs on the real Texas graph, paired over its fixed splits."""

from __future__ import annotations

import json

from attnas.comparison.runner import compare
from attnas.config import load_config


def test_the_full_and_quick_recipes_differ_only_in_budget_and_split_mode():
    full, quick = load_config("autoattend-hetero"), load_config("autoattend-hetero-quick")
    assert full.task.options.dataset == quick.task.options.dataset and full.space == quick.space
    # the full recipe: one search per split, each tested on its own split; the quick one pairs over splits
    assert full.task.options.split == "search-seed" and quick.task.options.split == "per-seed"
    assert full.space.options.pool == "hetero" and full.retrain.init == "scratch"
    assert (full.compare.search_seeds, full.compare.seeds) == (10, 3)  # ten search seeds: the ten fixed splits


def test_quick_comparison_on_texas_pairs_rows_over_the_splits(data_root, tmp_path):
    out = tmp_path / "cmp"
    result = compare("autoattend-hetero-quick", ["strategy.supernet.epochs=20", "retrain.epochs=10"],
                     baselines=["mlp", "gat_sep"], out=out, data_dir=data_root, search_seeds=1)
    assert [r["name"] for r in result["rows"]] == ["search", "random", "mlp", "gat_sep"]
    assert all(len(r["test_per_seed"]) == 2 for r in result["rows"])
    assert {v["a"] for v in result["verdicts"]} >= {"search"}
    for row in result["rows"]:  # every row retrained seeds 0 and 1, i.e. on texas's fixed splits 0 and 1
        folder = out / row["name"] / "retrain" / "texas" / "scratch"
        assert [json.loads((folder / f"seed-{k}.json").read_text())["seed"] for k in (0, 1)] == [0, 1]


def test_the_per_dataset_recipes_add_only_the_dataset_and_the_validation_chosen_baseline_settings():
    full = load_config("autoattend-hetero")
    for name, dataset, gat_dropout in (("texas", "texas", 0.6), ("wisconsin", "wisconsin", 0.2),
                                       ("chameleon", "chameleon_filtered", 0.6)):
        tuned = load_config(f"autoattend-hetero-{name}")
        assert tuned.task.options.dataset == dataset and tuned.strategy == full.strategy
        assert tuned.retrain == full.retrain and tuned.compare == full.compare
        chosen = tuned.space.options.options["baselines"]
        # all eight baselines carry a chosen point; GPR-GNN's alpha was picked at the top of its range
        assert sorted(chosen) == ["fagcn", "gat", "gat_sep", "gcn", "gprgnn", "h2gcn", "mlp", "sage"]
        assert chosen["gat"]["gat_dropout"] == gat_dropout and chosen["gprgnn"]["gpr_alpha"] == 0.9
        assert tuned.space.options.pool == full.space.options.pool


def test_a_baseline_row_says_which_settings_validation_chose():
    from attnas.runs.build import build_space

    rows = build_space(load_config("autoattend-hetero-chameleon")).baselines()
    assert rows["mlp"].description.endswith("; chosen on validation: hidden 32, dropout 0.5")
    assert rows["gprgnn"].description.endswith("gpr alpha 0.9")
    untuned = build_space(load_config("autoattend-hetero")).baselines()
    assert "chosen on validation" not in untuned["mlp"].description  # the paper's settings, as described


def test_the_deep_recipe_adds_platonovs_blocks_and_keeps_the_search():
    from attnas.runs.build import build_space

    full, deep = load_config("autoattend-hetero"), load_config("autoattend-hetero-deep")
    assert full.space.options.block == "plain"  # the existing hetero results stay as they were
    o = deep.space.options
    assert (o.block, o.stem, o.head, o.act, o.pool) == ("residual", "project", "linear", "gelu", "hetero")
    assert o.layers > full.space.options.layers and deep.strategy == full.strategy
    assert deep.task.options.split == "search-seed" and deep.retrain.epochs == full.retrain.epochs
    rows = build_space(deep).baselines()
    assert {"res_sage", "res_gat_sep", "res_mlp", "sage", "gat_sep"} <= set(rows)
