"""The mechanisms section of report.md: drop scores beside each mechanism's costs."""

from __future__ import annotations

from attnas.reporting.report_mechanisms import mechanism_section


def test_heads_of_a_heterogeneous_search_take_their_mechanisms_costs():
    metrics = {"drop_score_softmax/0": 0.1, "drop_score_linear/0": 0.3, "drop_score_linear/1": -0.05,
               "selection": {"kept": ["linear/0", "softmax/0"]},
               "mechanism_costs": {"softmax": {"params": 1200, "latency_ms": 4.5},
                                   "linear": {"params": 1100, "latency_ms": 1.25},
                                   "local": {"params": 1100, "latency_ms": 2.0}},
               "mechanism_costs_input": {"tokens": [16, 24, "int64"], "y": [16, "int64"]}}
    lines = mechanism_section(metrics)
    assert lines[0] == "## Mechanisms"
    assert "measured on the input tokens [16, 24], y [16]." in lines[2]
    # how latency_ms was measured, where the search recorded it
    lines = mechanism_section({**metrics, "costs_latency": "network"})
    assert lines[2].endswith("measured on the input tokens [16, 24], y [16]; `latency_ms`: the whole network "
                             "timed (`strategy.costs.latency`: network).")
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| block")]
    assert rows == ["| linear/0 **(kept)** | 0.3000 | 1100 | 1.25 |",  # highest drop score first
                    "| softmax/0 **(kept)** | 0.1000 | 1200 | 4.5 |",
                    "| linear/1 | -0.0500 | 1100 | 1.25 |",
                    "| local |  | 1100 | 2 |"]  # measured but not scored (e.g. pruned before the first trial)


def test_no_section_without_costs():
    assert mechanism_section({"drop_score_softmax": 0.1}) == []
    assert mechanism_section({"mechanism_costs": {}}) == []
