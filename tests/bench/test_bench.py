"""attnas bench end to end on a tiny grid: outputs, resuming, bad input before writing."""

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("nas_bench_graph")

from attnas.cli import app  # noqa: E402

runner = CliRunner()


def bench(*args):
    return runner.invoke(app, ["bench", *args])


def test_bench_writes_results_and_resumes(tmp_path):
    out = tmp_path / "b"
    args = ["--out", str(out), "--seeds", "3", "--budgets", "5,10", "--datasets", "cora,proteins",
            "--strategy", "table-random", "--strategy", "regularized-evolution:population=4,sample_size=2"]
    r = bench(*args)
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "bench.json").read_text())
    assert summary["seeds"] == 3 and summary["budgets"] == [5, 10]
    assert {p["dataset"] for p in summary["paired"]} == {"cora", "proteins"}
    assert [p["datasets"] for p in summary["pooled"]] == [["cora"], ["cora"]]
    assert (out / "figures" / "cora.png").stat().st_size > 0 and (out / "figures" / "proteins.png").exists()
    md = (out / "bench.md").read_text()
    assert "## 10 queries" in md and "Pooled over the datasets other than proteins" in md
    cell = next((out / "cells" / "cora").glob("table-random-10.json"))
    before = cell.stat().st_mtime_ns
    r = bench(*args)
    assert r.exit_code == 0 and cell.stat().st_mtime_ns == before


@pytest.mark.parametrize("args, message", [
    (["--budgets", "0"], "--budgets"),
    (["--budgets", "a"], "--budgets"),
    (["--datasets", "corra"], "cora"),
    (["--strategy", "regularized-evolution"], "include it"),
    (["--seeds", "0"], "seeds"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    r = bench("--out", str(tmp_path / "b"), *args)
    assert r.exit_code == 2 and message in r.output
    assert not (tmp_path / "b").exists()
