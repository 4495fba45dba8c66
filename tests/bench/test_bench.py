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


def test_bench_under_a_constraint_with_fronts_compares_hypervolumes(tmp_path):
    pytest.importorskip("pymoo")
    out = tmp_path / "b"
    r = bench("--out", str(out), "--seeds", "3", "--budgets", "20", "--datasets", "cora",
              "--strategy", "table-random", "--strategy", "regularized-evolution:population=5,sample_size=2",
              "--constraint", "params=1.2e6", "--objectives", "val_score,params")
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "bench.json").read_text())
    assert summary["constraints"] == {"params": 1.2e6} and summary["objectives"] == ["val_score", "params"]
    fronts = {f["strategy"].split(":")[0]: f for f in summary["fronts"]}
    assert 0 < fronts["table-random"]["hv"]["mean"] <= 1 and "hv_p" in fronts["regularized-evolution"]
    cell = json.loads((out / "cells" / "cora" / "table-random-20.json").read_text())
    assert cell["settings"]["constraints"] == {"params": 1.2e6} and len(cell["hv"]) == 3
    md = (out / "bench.md").read_text()
    assert "hypervolume ratio" in md and "under the constraints params <= 1.2e+06 with the objectives" in md


@pytest.mark.parametrize("args, message", [
    (["--constraint", "params=1e5"], "0 of the table's 26206 architectures meet"),
    (["--constraint", "params"], "COST=LIMIT"),
    (["--constraint", "macs=5"], "holds the costs"),
    (["--strategy", "local-search", "--objectives", "val_score,params"], "unknown setting 'objectives'"),
    (["--strategy", "table-random:constraints=5"], "the bench's --constraint"),
    (["--strategy", "table-random:objectives=val_score"], "the bench's --objectives"),
])
def test_bad_costs_are_one_line_and_write_nothing(tmp_path, args, message):
    r = bench("--out", str(tmp_path / "b"), "--datasets", "cora", "--seeds", "2", "--budgets", "10",
              "--strategy", "table-random", *args)
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "b").exists()
