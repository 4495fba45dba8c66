"""docs/results/mqar/seed_table.py: each mechanism alone over training seeds."""

from __future__ import annotations

import json

import pytest

from docs.results.mqar.seed_table import main, seed_rows, table


def write(folder, mech, val, test):
    (folder / mech).mkdir(parents=True)
    (folder / mech / "metrics.json").write_text(json.dumps({"val_accuracy": val, "test_accuracy": test}))


@pytest.fixture
def seeds(tmp_path):
    folders = [tmp_path / f"s{k}" for k in range(3)]
    for folder, (a, b) in zip(folders, [(1.0, 0.5), (0.98, 0.52), (0.96, 0.99)]):
        write(folder, "softmax", a, a)
        write(folder, "linear", b, b)
    write(folders[0], "local", 0.1, 0.1)  # in one seed only: left out
    return folders


def test_rows_hold_the_mechanisms_every_seed_has(seeds):
    rows = seed_rows(seeds)
    assert list(rows) == ["softmax", "linear"]
    assert rows["linear"] == [(0.5, 0.5), (0.52, 0.52), (0.99, 0.99)]


def test_table_means_stds_and_the_pick(seeds):
    text = table(seed_rows(seeds), pick="linear")
    assert "| `softmax` | 100.0 | 98.0 | 96.0 | 98.0 ± 2.0 | 98.0 |" in text
    assert "| `linear` | 50.0 | 52.0 | 99.0 | 67.0 ± 27.7 | 67.0 |" in text
    assert "Best by mean validation accuracy: `softmax` (98.0 test)" in text
    assert "within 2 points of it: `softmax`" in text and "`linear`: 67.0, 31.0 points below" in text


def test_main_refuses_an_unknown_pick(seeds, capsys):
    with pytest.raises(SystemExit, match="no runs of that mechanism"):
        main([str(f) for f in seeds] + ["--pick", "reformer"])
