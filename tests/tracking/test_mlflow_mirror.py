"""``--mlflow URI``: events mirrored as MLflow metrics, the run directory unchanged."""

from __future__ import annotations

import json
import socket
import sys
import threading

import pytest
from typer.testing import CliRunner

from attnas.cli import app
from attnas.runs.run_dir import _event_listeners
from attnas.tracking.event_mirrors import scalars
from attnas.tracking.mlflow_mirror import MAX_KEY_LENGTH, metric_key

runner = CliRunner()


@pytest.fixture
def mlflow_env(monkeypatch):
    """MLflow's client, a local file store allowed (MLflow 3 refuses it by default), no telemetry."""
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_tags_become_valid_mlflow_keys():
    assert metric_key("supernet/loss") == "supernet/loss"
    assert metric_key("evolution/costs/latency_ms") == "evolution/costs/latency_ms"
    assert metric_key("search-done/val acc.5") == "search-done/val acc.5"  # spaces, dashes and dots stay
    assert metric_key("rerank/top@1:κ (%)") == "rerank/top_1__ ___"  # other characters become _
    assert metric_key("/a//b/./..") == "_/a/_/b/_/_"  # no path that normalises to another
    long = metric_key("p/" + "x" * 300)
    assert len(long) == MAX_KEY_LENGTH and long.startswith("p/x")
    assert metric_key("p" * 249 + "/x") == "p" * 249  # a cut that leaves an empty segment drops it
    _, values = scalars({"phase": "evolution", "index": 3, "accuracy": 0.5, "costs": {"latency ms/run": 1.5}},
                        count=0)
    assert [metric_key(t) for t, _ in values] == ["evolution/accuracy", "evolution/costs/latency ms/run"]


def test_a_missing_package_is_a_one_line_error_before_anything_runs(tmp_path, tiny_recipe, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import fails
    out = tmp_path / "run"
    r = runner.invoke(app, ["search", str(tiny_recipe), "--out", str(out), "--mlflow", f"file:{tmp_path}/mlruns"])
    assert r.exit_code == 2
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --mlflow needs the mlflow-skinny package"), r.output
    assert 'pip install "attnas[mlflow]"' in lines[0]
    assert not out.exists() and not (tmp_path / "mlruns").exists()


def test_bad_options_are_one_line_errors_before_anything_runs(tmp_path, tiny_recipe, mlflow_env):
    out = tmp_path / "run"
    for extra in (["--mlflow-experiment", "x"], ["--mlflow", "nosuchscheme://x"],
                  ["--mlflow", f"file:{tmp_path}/mlruns", "--mlflow-experiment", " "]):
        r = runner.invoke(app, ["search", str(tiny_recipe), "--out", str(out), *extra])
        lines = [line for line in r.output.splitlines() if line.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: --mlflow"), r.output
        assert not out.exists()


def test_a_search_is_mirrored_and_its_run_directory_is_unchanged(tmp_path, tiny_recipe, mlflow_env, recwarn):
    from mlflow.tracking import MlflowClient

    uri = f"file:{tmp_path}/mlruns"
    args = ["search", str(tiny_recipe), "--set", "strategy.objectives=[val_accuracy, params]"]
    plain = runner.invoke(app, [*args, "--out", str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "run"), "--mlflow", uri, "--mlflow-experiment", "tiny"])
    assert r.exit_code == 0, r.output
    assert not [w for w in recwarn if "--mlflow" in str(w.message)]
    assert not _event_listeners  # the mirror is gone once the command ends
    assert _files(tmp_path / "run") == _files(tmp_path / "plain")

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    assert run.info.run_name == "run" and run.info.status == "FINISHED"
    assert run.data.tags["attnas.run_dir"] == str((tmp_path / "run").resolve())
    assert {"supernet/loss", "evolution/accuracy", "evolution/costs/params"} <= set(run.data.metrics)
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    evolution = [e for e in events if e["phase"] == "evolution"]
    history = client.get_metric_history(run.info.run_id, "evolution/accuracy")
    assert sorted((m.step, m.value) for m in history) == sorted((e["index"], e["accuracy"]) for e in evolution)
    assert sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "evolution/costs/params")) \
        == sorted((e["index"], float(e["costs"]["params"])) for e in evolution)
    supernet = [e for e in events if e["phase"] == "supernet"]
    assert sorted((m.step, m.value, m.timestamp) for m in client.get_metric_history(run.info.run_id, "supernet/loss")) \
        == sorted((e["epoch"], e["loss"], int(round(e["time"] * 1000))) for e in supernet)


def test_a_failing_server_warns_once_and_the_search_finishes(tmp_path, tiny_recipe, mlflow_env, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own retries would take minutes
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.warns(UserWarning) as record:
        r = runner.invoke(app, ["search", str(tiny_recipe), "--out", str(tmp_path / "run"),
                                "--mlflow", f"http://127.0.0.1:{port}"])
    assert r.exit_code == 0, r.output
    warned = [str(w.message) for w in record if "--mlflow" in str(w.message)]
    assert len(warned) == 1 and warned[0].startswith("--mlflow: stopped mirroring events (MlflowException: "), warned
    assert "\n" not in warned[0]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "finished"
    assert not _event_listeners


def test_a_server_that_does_not_answer_never_holds_the_run_up(tmp_path, mlflow_env):
    from attnas.tracking.event_mirrors import listening
    from attnas.tracking.mlflow_mirror import MlflowMirror

    mirror = MlflowMirror(f"file:{tmp_path}/mlruns", flush_seconds=0.2)
    release = threading.Event()
    mirror.client.log_batch = lambda *a, **k: release.wait(10)  # a request that hangs
    try:
        with pytest.warns(UserWarning, match="--mlflow: stopped mirroring events .TimeoutError"):
            with listening(mirror):
                for i in range(3):
                    mirror(tmp_path / "run", {"phase": "supernet", "epoch": i, "loss": 1.0, "time": 1.0})
    finally:
        release.set()


def test_a_resumed_run_continues_its_mlflow_run(tmp_path, mlflow_env):
    from attnas.tracking.event_mirrors import listening
    from attnas.tracking.mlflow_mirror import MlflowMirror

    uri = f"file:{tmp_path}/mlruns"

    def log(mirror, epochs):
        for e in epochs:
            mirror(tmp_path / "run", {"phase": "supernet", "epoch": e, "loss": float(e), "time": 1.0 + e})

    with pytest.raises(KeyboardInterrupt), listening(MlflowMirror(uri)) as mirror:
        log(mirror, [0, 1])
        raise KeyboardInterrupt
    client = mirror.client
    experiment_id = client.get_experiment_by_name("attnas").experiment_id
    (killed,) = client.search_runs([experiment_id])
    assert killed.info.status == "KILLED"
    with listening(MlflowMirror(uri)) as mirror:
        log(mirror, [1, 2])  # the resumed process redoes epoch 1 after its checkpoint
    (run,) = client.search_runs([experiment_id])
    assert run.info.run_id == killed.info.run_id and run.info.status == "FINISHED"
    history = client.get_metric_history(run.info.run_id, "supernet/loss")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.0), (1, 1.0), (1, 1.0), (2, 2.0)]
