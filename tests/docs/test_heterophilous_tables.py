"""docs/results/heterophilous/tables.py: headings say what the retraining seeds are, verdicts pool search seeds."""

from __future__ import annotations

import json

import pytest

from docs.results.heterophilous import tables


def _result(split, test, val):
    rows = [{"name": n, "arch": f"arch-{n}", "search_seconds": 1.0 if n != "gat" else None,
             "test_per_seed": t, "val_per_seed": v} for n, t, v in zip(("search", "random", "gat", "mlp"), test, val)]
    return {"task": {"name": "heterophilous", "split": split}, "rows": rows}


@pytest.mark.parametrize("split, heading", [("per-seed", "(2 search seeds x 3 splits)"),
                                            ("search-seed", "(2 search seeds x 3 trainings on its search seed's split)"),
                                            (4, "(2 search seeds x 3 trainings on split 4)")])
def test_heading_counts_splits_only_when_each_seed_has_its_own(tmp_path, split, heading):
    for s, shift in ((0, 0.0), (1, 0.01)):
        d = tmp_path / f"texas-s{s}"
        d.mkdir()
        test = [[0.8 + shift, 0.82, 0.81], [0.78, 0.8, 0.79], [0.5, 0.52, 0.55], [0.79, 0.81, 0.8]]
        val = [[0.85, 0.86, 0.84], [0.8, 0.8, 0.8], [0.5, 0.5, 0.5], [0.9, 0.9, 0.9]]
        (d / "compare.json").write_text(json.dumps(_result(split, test, val)))
    results = tables.load(tmp_path, "texas")
    assert [r["search_seed"] for r in results] == [0, 1]
    text = tables.table("texas", results)
    assert text.splitlines()[0] == f"### texas {heading}"
    # the comparator is the best baseline by VALIDATION (mlp), not by test; 6 pairs pooled over search seeds
    assert "Best baseline by validation: mlp." in text
    assert "- search vs mlp:" in text and "6 pairs" in text
