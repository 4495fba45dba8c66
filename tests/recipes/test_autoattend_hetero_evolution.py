"""``autoattend-hetero-evolution``: regularized evolution over trained candidates of the hetero
space, against random search at equal compute, each search seed on its own fixed split (real Texas)."""

from __future__ import annotations

import json

import yaml

from attnas.comparison.runner import compare
from attnas.config import load_config

TINY = ["task.dataset=texas", "strategy.samples=4", "strategy.population=2", "strategy.sample_size=2",
        "strategy.train.epochs=2", "retrain.epochs=3"]


def _candidates(run, phase):
    return [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["phase"] == phase]


def test_the_recipe_trains_candidates_and_keeps_chameleons_baselines_and_protocol():
    evo, base = load_config("autoattend-hetero-evolution"), load_config("autoattend-hetero-chameleon")
    assert evo.strategy.name == "evolution-trained"
    o = evo.strategy.options
    assert o.sample_size <= o.population <= o.samples and o.train.init == "scratch"
    assert (o.train.lr, o.train.weight_decay) == (base.retrain.lr, base.retrain.weight_decay)
    assert evo.space == base.space and evo.retrain == base.retrain and evo.compare == base.compare
    assert evo.task == base.task and evo.task.options.split == "search-seed"


def test_evolution_and_random_search_at_equal_compute_on_texas_each_on_its_search_seeds_split(data_root, tmp_path):
    out = tmp_path / "cmp"
    result = compare("autoattend-hetero-evolution", TINY, seeds=1, baselines=["mlp"], out=out,
                     data_dir=data_root, search_seeds=2)
    assert [r["name"] for r in result["rows"]] == ["search", "random", "mlp"]
    for s in (0, 1):
        evo_run, rnd_run = out / f"search-seed-{s}" / "search", out / f"search-seed-{s}" / "random"
        evo, rnd = _candidates(evo_run, "evolution-trained"), _candidates(rnd_run, "random-trained")
        # equal compute: as many distinct candidates, each trained for the same two epochs
        assert len(evo) == len(rnd) == 4 and all(e["epochs"] == 2 for e in evo + rnd)
        assert [e["origin"] for e in evo] == ["prior", "prior", "mutation", "mutation"]
        assert len({json.dumps(e["arch"], sort_keys=True) for e in evo}) == 4
        # both start from the same prior draws with the same seeds
        assert [e["arch"] for e in evo[:2]] == [e["arch"] for e in rnd[:2]]
        assert [e["val_accuracy"] for e in evo[:2]] == [e["val_accuracy"] for e in rnd[:2]]
        # the pick is the best validation score
        best = max(evo, key=lambda e: e["val_accuracy"])
        assert json.loads((evo_run / "arch.json").read_text())["choices"] == best["arch"]
        for run in (evo_run, rnd_run):  # seed s with split: search-seed -> searched on fixed split s
            config = yaml.safe_load((run / "config.yaml").read_text())
            assert (config["seed"], config["task"]["split"]) == (s, "search-seed")
