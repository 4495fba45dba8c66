"""AutoAttend text search end to end: real SST through the pipeline, transfer to SST-2, a user CSV, recipes."""

from __future__ import annotations

import json

import pytest
import yaml

from attnas import pipeline
from attnas.config import load_config
from attnas.spaces.autoattend import AutoAttendSpace
from attnas.training import retraining

TEXT_RECIPES = ["autoattend-sst5", "autoattend-sst2", "autoattend-sst5-quick", "autoattend-sst5-random",
                "autoattend-sst5-baseline-space", "transformer-sst5", "transformer-sst2"]

TINY_SPACE = {"name": "autoattend", "pool": "text", "layers": 2, "hidden": 8, "heads": 2, "dropout": 0.1,
              "attn_dropout": 0.1}
TINY_STRATEGY = {"name": "one-shot-evolution",
                 "supernet": {"epochs": 1, "lr": 0.005, "weight_decay": 0.0, "batch_size": 512},
                 "evolution": {"population": 6, "parents": 2, "children": 2, "rounds": 1},
                 "rerank": {"top_k": 2, "epochs": 0}}
TINY_RETRAIN = {"epochs": 1, "lr": 0.005, "weight_decay": 0.0, "batch_size": 512, "patience": 0, "seeds": 2}


def tiny_recipe(task: dict, **changes) -> dict:
    recipe = {"name": "tiny-text", "seed": 0, "task": {"name": "text-classification", "bucket": 4, **task},
              "space": dict(TINY_SPACE), "strategy": dict(TINY_STRATEGY), "retrain": dict(TINY_RETRAIN)}
    recipe.update(changes)
    return recipe


@pytest.mark.parametrize("name", TEXT_RECIPES)
def test_text_recipes_validate(name):
    config = load_config(name)
    assert config.task.name == "text-classification"
    if config.space.name == "autoattend":
        space = AutoAttendSpace(config.space.options)
        assert space.options.pool == "text"
        assert space.size() > 1


def test_paper_protocol_settings():
    c = load_config("autoattend-sst5")
    s, st, rt = c.space.options, c.strategy.options, c.retrain
    assert (s.layers, s.hidden, s.heads, s.dropout) == (24, 64, 8, 0.1)
    assert (c.task.options.max_len, c.task.options.batch_size) == (64, 128)
    assert (st.supernet.lr, st.supernet.batch_size) == (0.005, 128)
    ev = st.evolution
    assert ev.population + ev.rounds * ev.children == 1000 and ev.parents == 100 and st.rerank.top_k == 10
    assert (rt.lr, rt.init) == (0.0005, "scratch")
    ablation = load_config("autoattend-sst5-baseline-space").space.options
    assert ablation.layer_types == ("add",) and "self_attention" in ablation.ops


def test_search_on_real_sst_then_transfer_to_sst2(data_root, tmp_path):
    run = pipeline.search(tiny_recipe({"dataset": "sst5"}), out=tmp_path / "run", data_dir=data_root)
    metrics = json.loads(run.file("metrics.json").read_text())
    assert metrics["evaluated"] == 8
    assert 0.0 <= metrics["test_accuracy"] <= 1.0 and metrics["params"] > 0
    assert len(run.events("evolution")) == 8 and len(run.events("supernet")) == 1
    model = pipeline.load_model(run.path, data_dir=data_root)
    assert not hasattr(model, "sharing")  # a standalone model, not the supernet
    summary = retraining.retrain(run.path, dataset="sst2", seeds=1, data_dir=data_root)
    assert summary["dataset"] == "sst2" and summary["init"] == "scratch"
    per_seed = json.loads((run.path / "retrain" / "sst2" / "scratch" / "seed-0.json").read_text())
    assert 0.0 <= per_seed["test_accuracy"] <= 1.0
    metrics = json.loads(run.file("metrics.json").read_text())
    assert "retrain_sst2_scratch_test_accuracy_mean" in metrics


def test_transformer_baseline_through_the_fixed_strategy(data_root, tmp_path):
    recipe = tiny_recipe({"dataset": "sst2"}, space={"name": "text-transformer", "layers": 1, "hidden": 16,
                                                     "heads": 2},
                         strategy={"name": "fixed", "arch": {"model": "transformer"}})
    run = pipeline.search(recipe, out=tmp_path / "tr", data_dir=data_root)
    metrics = json.loads(run.file("metrics.json").read_text())
    assert metrics["arch"].startswith("transformer(layers=1") and 0.0 <= metrics["test_accuracy"] <= 1.0


def test_user_csv_end_to_end(tmp_path):
    rows = ["text,label"]
    words = {"pos": ["good", "great", "fine", "lovely"], "neg": ["bad", "awful", "poor", "dull"]}
    for i in range(120):
        label = "pos" if i % 2 else "neg"
        rows.append(f"\"a {words[label][i % 4]} film , truly {words[label][(i + 1) % 4]}\",{label}")
    path = tmp_path / "reviews.csv"
    path.write_text("\n".join(rows) + "\n")
    task = {"dataset": "csv", "glove": "none", "embedding_dim": 8, "csv": {"path": str(path)}}
    recipe = tiny_recipe(task, retrain=dict(TINY_RETRAIN, epochs=8, lr=0.01, batch_size=16))
    recipe_file = tmp_path / "recipe.yaml"
    recipe_file.write_text(yaml.safe_dump(recipe))
    run = pipeline.search(recipe_file, out=tmp_path / "csv-run", data_dir=tmp_path)
    metrics = json.loads(run.file("metrics.json").read_text())
    assert metrics["val_accuracy"] >= 0.9  # the words give the label away
    from attnas.core.errors import DataError

    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nfine film,pos\n,neg\n")
    with pytest.raises(DataError, match="bad.csv"):
        pipeline.search(tiny_recipe(dict(task, csv={"path": str(bad)})), out=tmp_path / "bad-run", data_dir=tmp_path)
    assert not (tmp_path / "bad-run" / "config.yaml").exists()
