"""``--tensorboard DIR``: events mirrored as TensorBoard scalars, the run directory unchanged."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from attnas.cli import app
from attnas.runs.run_dir import _event_listeners
from attnas.tracking.event_mirrors import scalars

runner = CliRunner()


def test_an_events_numbers_become_scalars_at_its_step():
    step, values = scalars({"phase": "evolution", "stage": 1, "index": 7, "accuracy": 0.5, "arch": {"layers": []},
                            "costs": {"params": 2000, "latency_ms": 1.5}, "time": 1.0, "ok": True}, count=3)
    assert step == 7  # the event's index, not the count
    assert values == [("evolution/accuracy", 0.5), ("evolution/costs/params", 2000.0),
                      ("evolution/costs/latency_ms", 1.5)]  # no step keys, no booleans, no lists
    step, values = scalars({"phase": "supernet", "epoch": 2, "loss": 1.25}, count=0)
    assert (step, values) == (2, [("supernet/loss", 1.25)])
    assert scalars({"phase": "search-done", "val": 0.9}, count=4) == (4, [("search-done/val", 0.9)])


def test_a_missing_package_is_a_one_line_error_before_anything_runs(tmp_path, tiny_recipe, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    out = tmp_path / "run"
    r = runner.invoke(app, ["search", str(tiny_recipe), "--out", str(out), "--tensorboard", str(tmp_path / "tb")])
    assert r.exit_code == 2
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --tensorboard needs the tensorboard package"), r.output
    assert 'pip install "attnas[tensorboard]"' in lines[0]
    assert not out.exists() and not (tmp_path / "tb").exists()


def test_a_search_is_mirrored_and_its_run_directory_is_unchanged(tmp_path, tiny_recipe):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = ["search", str(tiny_recipe), "--set", "strategy.objectives=[val_accuracy, params]"]
    plain = runner.invoke(app, [*args, "--out", str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "run"), "--tensorboard", str(tmp_path / "tb")])
    assert r.exit_code == 0, r.output
    assert not _event_listeners  # the mirror is gone once the command ends
    files = sorted(p.relative_to(tmp_path / "run").as_posix() for p in (tmp_path / "run").rglob("*"))
    assert files == sorted(p.relative_to(tmp_path / "plain").as_posix() for p in (tmp_path / "plain").rglob("*"))
    acc = EventAccumulator(str(tmp_path / "tb" / "run"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"supernet/loss", "evolution/accuracy", "evolution/costs/params"} <= tags
    events = [e for e in map(__import__("json").loads, (tmp_path / "run" / "events.jsonl").read_text().splitlines())
              if e["phase"] == "evolution"]
    mirrored = {s.step: s.value for s in acc.Scalars("evolution/accuracy")}
    assert mirrored == {e["index"]: pytest.approx(e["accuracy"]) for e in events}
