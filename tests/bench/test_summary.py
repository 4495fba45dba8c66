"""Bench summaries: paired tests against random search, pooling without the control, inflation."""

import pytest

from attnas.bench.summary import curve_band, summarise_cells


def cell(dataset, strategy, budget, test, val=None, by_test=None):
    n = len(test)
    return {"dataset": dataset, "strategy": strategy, "budget": budget, "test": test, "val": val or test,
            "test_by_test": by_test or [t + 0.01 for t in test], "curves": [[t, t] for t in test], "seconds": 0.1}


def test_paired_pooled_and_inflation():
    rs_a, rs_b = [0.70, 0.72, 0.71, 0.73], [0.80, 0.81, 0.79, 0.80]
    cells = [cell("cora", "table-random", 10, rs_a), cell("cora", "re", 10, [x + 0.01 for x in rs_a]),
             cell("pubmed", "table-random", 10, rs_b), cell("pubmed", "re", 10, [x + 0.03 for x in rs_b]),
             cell("proteins", "table-random", 10, rs_b), cell("proteins", "re", 10, [x - 0.5 for x in rs_b])]
    s = summarise_cells(cells)
    per = {p["dataset"]: p for p in s["paired"]}
    assert per["cora"]["diff_mean"] == pytest.approx(0.01) and per["cora"]["verdict"] == "better"
    assert per["proteins"]["verdict"] == "worse"
    (pooled,) = s["pooled"]
    assert pooled["datasets"] == ["cora", "pubmed"]  # proteins, the control, left out
    assert pooled["diff_mean"] == pytest.approx(0.02)
    assert pooled["per_dataset"] == {"better": 2}
    infl = {i["dataset"]: i for i in s["inflation"]}
    assert infl["cora"]["inflation"]["mean"] == pytest.approx(0.01)
    assert set(s["curves"]) == {f"{d}/{k}" for d in ("cora", "pubmed", "proteins") for k in ("table-random", "re")}


def test_curve_band_is_mean_and_t_interval():
    band = curve_band([[0.0, 1.0], [2.0, 1.0]])
    assert band["mean"] == [1.0, 1.0]
    assert band["low"][1] == band["high"][1] == 1.0
    assert band["low"][0] < 0 < 2 < band["high"][0]
