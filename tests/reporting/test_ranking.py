"""Supernet ranking quality (attnas.reporting.ranking): scores, stand-alone training, correlations, resume."""

from __future__ import annotations

import json

import pytest
import yaml

from attnas.config import load_config
from attnas.core.errors import RunDirError
from attnas.reporting.ranking import rank_correlations, same_config, supernet_ranking


def test_rank_correlations_of_known_orders():
    assert rank_correlations([1, 2, 3, 4], [10, 20, 30, 40])["kendall_tau"] == pytest.approx(1.0)
    assert rank_correlations([1, 2, 3, 4], [4, 3, 2, 1])["spearman_rho"] == pytest.approx(-1.0)
    # one swapped pair of 4: 5 concordant, 1 discordant pair
    assert rank_correlations([1, 2, 3, 4], [1, 3, 2, 4])["kendall_tau"] == pytest.approx(4 / 6)


def test_ranking_measures_resumes_and_compares_supernets(tiny_recipe_data, tmp_path):
    out = tmp_path / "ranking"
    args = dict(out=out, archs=5, seeds=2)
    summary = supernet_ranking(tiny_recipe_data, ["retrain.epochs=3", "strategy.supernet.epochs=4"], **args)
    rows = summary["rows"]
    assert len(rows) == 5 and len({r["arch"] for r in rows}) == 5
    assert all(0 <= r["supernet"] <= 1 and 0 <= r["val_mean"] <= 1 for r in rows)
    assert -1 <= summary["val"]["kendall_tau"] <= 1
    assert (out / "ranking-default.png").exists() and "Kendall's tau" in (out / "ranking-default.md").read_text()
    lines = (out / "standalone.jsonl").read_text().splitlines()
    assert len(lines) == 10
    # a second supernet variant reuses the stand-alone results: nothing is trained again
    # (its label, with a path in it, becomes a safe file name: nothing is written outside the folder)
    other = supernet_ranking(tiny_recipe_data, ["retrain.epochs=3", "strategy.supernet.epochs=6"],
                             label="../../longer", **args)
    assert (out / "standalone.jsonl").read_text().splitlines() == lines
    assert [r["val_mean"] for r in other["rows"]] == [r["val_mean"] for r in rows]
    assert json.loads((out / "ranking-longer.json").read_text())["label"] == "../../longer"
    assert (out / "supernet-longer").is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["ranking"]
    # a supernet folder of another configuration is refused, not overwritten
    with pytest.raises(RunDirError, match="another configuration"):
        supernet_ranking(tiny_recipe_data, ["retrain.epochs=3", "strategy.supernet.epochs=7"], label="longer", **args)
    # so are other architectures in the same folder
    with pytest.raises(RunDirError, match="other architectures"):
        supernet_ranking(tiny_recipe_data, ["retrain.epochs=3"], out=out, archs=6, seeds=2)


def test_a_claim_of_a_process_that_is_gone_is_taken_over(tmp_path):
    import os
    import subprocess
    import sys

    from attnas.reporting.ranking import _claim

    assert _claim(tmp_path, "0-0") and _claim(tmp_path, "0-0")  # this process's own claim
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "1-0").write_text(gone.stdout.strip())
    assert _claim(tmp_path, "1-0") and (tmp_path / "1-0").read_text() == str(os.getpid())
    (tmp_path / "2-0").write_text(str(os.getppid()))  # a live process holds it
    assert not _claim(tmp_path, "2-0")


def test_the_markdown_says_why_a_correlation_is_undefined():
    """scipy's tau and rho are NaN when the scores of one side are all equal: the page says
    so instead of printing ``nan``."""
    from attnas.reporting.ranking import rank_correlations, ranking_markdown

    constant = rank_correlations([0.5, 0.5, 0.5, 0.5], [0.1, 0.4, 0.2, 0.3])
    ordered = rank_correlations([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4])
    best = {"arch": "a", "val_mean": 0.5, "test_mean": 0.5, "val_rank": 1}
    text = ranking_markdown({"recipe": "r", "label": "x", "archs": 4, "seeds": 1, "val": constant,
                             "test": ordered, "supernet_top1": best, "standalone_best": best})
    assert "nan" not in text.lower()
    assert "| validation | undefined (one of the two score lists is constant) | undefined" in text
    assert "| test | 1.000 (p " in text


def test_a_supernet_folder_is_of_the_same_configuration_whatever_its_key_order():
    """A ``config.yaml`` written before an options class listed its fields in another order
    (the one-shot options now list their shared fields first) still matches its recipe."""
    config = load_config("autoattend-sst5-quick")
    reordered = yaml.safe_dump(yaml.safe_load(config.to_yaml()), sort_keys=True)
    assert reordered != config.to_yaml() and same_config(reordered, config)
    assert not same_config(config.replace(seed=config.seed + 1).to_yaml(), config)
