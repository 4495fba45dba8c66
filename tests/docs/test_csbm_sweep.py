"""docs/results/heterophilous/csbm_sweep.py: per-graph and pooled tables from compare.json records."""

from __future__ import annotations

import json

import pytest

from docs.results.heterophilous import csbm_sweep

ROWS = ("search", "random", "mlp", "gcn", "gat", "gprgnn")


def _write(root, phi, graph, shift):
    d = root / f"phi{phi}-g{graph}"
    d.mkdir(parents=True)
    rows = [{"name": n, "arch": f"arch-{n}-g{graph}",
             "test_per_seed": [0.5 + 0.05 * i + shift + 0.01 * k for k in range(3)]} for i, n in enumerate(ROWS)]
    (d / "compare.json").write_text(json.dumps({"best_baseline": "gprgnn", "rows": rows}))


def test_graph_option_tables_that_graph_and_pooled_pairs_over_graphs(tmp_path, capsys):
    for g, shift in ((0, 0.0), (2, 0.02)):
        for phi in (-1, 0.5):
            _write(tmp_path / "runs", phi, g, shift)
    csbm_sweep.main([str(tmp_path / "runs"), str(tmp_path / "g2.png"), "--graph", "2"])
    out = capsys.readouterr().out
    assert "`arch-search-g2`" in out and "arch-search-g0" not in out
    assert "| φ = -1 | φ = 0.5 |" in out and (tmp_path / "g2.png").stat().st_size > 0
    # the search is 0.25 below GPR-GNN on every split of every graph
    assert out.count("-25.0 (p = ") == 2
    csbm_sweep.main([str(tmp_path / "runs"), str(tmp_path / "pooled.png"), "--pooled"])
    out = capsys.readouterr().out
    assert "| -1 | 0, 2 |" in out and "graph 0: `arch-search-g0`; graph 2: `arch-search-g2`" in out
    with pytest.raises(SystemExit, match="graph seed 1"):
        csbm_sweep.main([str(tmp_path / "runs"), str(tmp_path / "none.png"), "--graph", "1"])
