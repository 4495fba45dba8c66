"""Bench cells: strategy specifications, incumbent curves, resumable cells."""

import json

import numpy as np
import pytest

from attnas.bench.runner import StrategySpec, check_budgets, incumbent_curve
from attnas.core.errors import ConfigError


def test_the_incumbent_is_the_best_on_validation_so_far_earliest_on_ties():
    scores = np.array([0.5, 0.7, 0.6, 0.7, 0.9])
    tests = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    val, test = incumbent_curve(scores, tests)
    assert val.tolist() == [0.5, 0.7, 0.7, 0.7, 0.9]
    assert test.tolist() == [0.1, 0.2, 0.2, 0.2, 0.5]  # the tie at 0.7 keeps the first


def test_specs_parse_settings_and_name_bad_ones():
    spec = StrategySpec.parse("table-evolution:population_fraction=0.25,rounds=10")
    assert spec.name == "table-evolution" and spec.settings == {"population_fraction": 0.25, "rounds": 10}
    assert spec.options(80).budget == 80 and spec.options(80).rounds == 10
    with pytest.raises(ConfigError, match="regularized-evolution"):
        StrategySpec.parse("regularised-evolution")
    with pytest.raises(ConfigError, match="unknown setting 'pop'"):
        StrategySpec.parse("regularized-evolution:pop=3")
    with pytest.raises(ConfigError, match="sample_size"):
        StrategySpec.parse("regularized-evolution:sample_size=0")
    with pytest.raises(ConfigError, match="key=value"):
        StrategySpec.parse("regularized-evolution:population")
    with pytest.raises(ConfigError, match="--budgets"):
        StrategySpec.parse("table-random:budget=3")


def test_budgets_are_positive_and_sorted():
    assert check_budgets([50, 25, 50]) == [25, 50]
    with pytest.raises(ConfigError, match="--budgets"):
        check_budgets([0])


@pytest.mark.skipif(pytest.importorskip("importlib.util").find_spec("nas_bench_graph") is None,
                    reason="needs nas-bench-graph")
def test_cells_are_kept_and_reused(tmp_path):
    from attnas.bench.runner import cell_path, run_cells

    specs = [StrategySpec.parse("table-random"), StrategySpec.parse("local-search")]
    lines = []
    cells = run_cells(tmp_path, specs, ["cora"], [5, 12], 3, log=lines.append)
    assert len(cells) == 4 and len(lines) == 4
    c = cells[1]
    assert c["budget"] == 12 and len(c["test"]) == 3 and [len(k) for k in c["curves"]] == [12] * 3
    assert all(t == pytest.approx(k[-1], abs=1e-6) for t, k in zip(c["test"], c["curves"]))
    assert all(bt >= t for bt, t in zip(c["test_by_test"], c["test"]))
    path = cell_path(tmp_path, "cora", "table-random", 12)
    assert json.loads(path.read_text())["test"] == c["test"]
    lines.clear()
    again = run_cells(tmp_path, specs, ["cora"], [5, 12], 3, log=lines.append)
    assert again == cells and lines == []  # nothing recomputed
    run_cells(tmp_path, specs, ["cora"], [5, 12], 4, log=lines.append)
    assert len(lines) == 4  # other seeds: recomputed
