"""docs/results/heterophilous/csbm_graphs.py: the cSBM sweep over graph seeds, printed and recorded graphs."""

from __future__ import annotations

import json

import pytest

from docs.results.heterophilous import csbm_graphs

ROWS = ("search", "random", "mlp", "gcn", "gat", "gprgnn")


def _record(root, phi, graph, search):
    """A compare.json where every baseline scores 0.5 + 0.05 i on its three splits and the search ``search``."""
    d = root / f"phi{phi}-g{graph}"
    d.mkdir(parents=True)
    rows = [{"name": n, "arch": "a", "test_per_seed": [search if n == "search" else 0.5 + 0.05 * i] * 3}
            for i, n in enumerate(ROWS)]
    (d / "compare.json").write_text(json.dumps({"best_baseline": "gprgnn", "rows": rows}))


def _printed(path, graphs, diff_random):
    mean = {n: 50.0 + 5 * i for i, n in enumerate(ROWS)}
    entry = {"graphs": graphs, "best": "gprgnn", "mean": mean,
             "diff": {"random": diff_random, "best": [1.0] * len(graphs), "gat": [2.0] * len(graphs)}}
    path.write_text(json.dumps({"source": "test", "phi": {"-1": entry}}))


def test_means_weight_every_graph_and_differences_are_tested_over_graphs(tmp_path, capsys):
    records = tmp_path / "records"
    _record(records, -1, 2, search=0.8)  # graph 2: search 80, random 55, GAT 70, GPR-GNN 75
    _printed(records / "graphs-0-1.json", [0, 1], [1.0, 3.0])
    csbm_graphs.main([str(records), str(tmp_path / "f.png")])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| -1 |"))
    # search mean: printed graphs 0 and 1 both at 50, graph 2 at 80 -> 60; MLP 60 everywhere
    assert row.startswith("| -1 | 0, 1, 2 | 60.0 | ")
    # search - random: +1 / +3 printed, 80 - 55 = +25 recorded -> mean +9.7
    assert "+1.0 / +3.0 / +25.0: +9.7 (p = " in row
    assert "+1.0 / +1.0 / +5.0: +2.3 (p = " in row and "+2.0 / +2.0 / +10.0: +4.7 (p = " in row
    assert (tmp_path / "f.png").stat().st_size > 0


def test_a_graph_both_printed_and_recorded_is_refused(tmp_path):
    records = tmp_path / "records"
    _record(records, -1, 1, search=0.8)
    _printed(records / "graphs-0-1.json", [0, 1], [1.0, 3.0])
    with pytest.raises(ValueError, match="graph seed 1 at phi = -1 is both printed and recorded"):
        csbm_graphs.per_graph(records, records / "graphs-0-1.json")


def test_one_graph_shows_its_difference_without_a_test(tmp_path, capsys):
    records = tmp_path / "records"
    records.mkdir()
    _printed(records / "graphs-0-1.json", [0], [0.4])
    csbm_graphs.main([str(records), str(tmp_path / "f.png")])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| -1 |"))
    assert "| +0.4 |" in row and "p =" not in row


def test_missing_printed_figures_exit_with_the_path(tmp_path):
    with pytest.raises(SystemExit, match="no printed figures at"):
        csbm_graphs.main([str(tmp_path), str(tmp_path / "f.png")])
