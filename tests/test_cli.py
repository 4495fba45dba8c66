"""The command-line contract: list, show, search, retrain, evaluate, report, check-arch, errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnas import cli
from attnas.cli import app
from attnas.runtime import allocator, cpu_busy

runner = CliRunner()

#: Float32 noise as printed: 10 or more decimals (a float rounded to 6 significant digits has at most 9:
#: 0.000123457; smaller ones print as 1.23457e-05).
NOISE = r"\d\.\d{10,}"


def run(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_list_and_show():
    r = run("list")
    assert r.exit_code == 0
    for word in ("autoattend", "one-shot-evolution", "node-classification", "cora", "pyg/gat_16",
                 "autoattend-cora-quick"):
        assert word in r.output
    r = run("show", "autoattend-cora", "--set", "space.hidden=32")
    assert r.exit_code == 0 and "hidden: 32" in r.output


@pytest.mark.parametrize("args,message", [
    (["show", "autoattend-cora", "--set", "space.hiden=3"], "space.hiden: unknown key"),
    (["search", "no-such-recipe"], "unknown recipe 'no-such-recipe'"),
    (["search"], "give a RECIPE"),
    (["list", "spacez"], "unknown list target 'spacez'"),
    (["evaluate", "/nonexistent/run"], "is not a run directory"),
])
def test_errors_are_one_line_with_status_2(args, message):
    r = runner.invoke(app, args)
    assert r.exit_code == 2
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.output


def test_bad_config_writes_nothing(tmp_path):
    out = tmp_path / "run"
    r = runner.invoke(app, ["search", "autoattend-digits-quick", "--out", str(out), "--set", "space.ops=[gcnn]"])
    assert r.exit_code == 2 and "gcnn" in r.output
    assert not out.exists() or not any(out.iterdir())


def test_unwritable_run_dir_fails_before_work(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = runner.invoke(app, ["search", "autoattend-digits-quick", "--out", str(blocker / "run")])
    assert r.exit_code == 2 and "not writable" in r.output


def test_search_retrain_evaluate_report_check_arch(tiny_recipe, tmp_path):
    out = tmp_path / "run"
    r = run("search", str(tiny_recipe), "--out", str(out), "--set", "strategy.supernet.epochs=15")
    assert r.exit_code == 0, r.output
    for f in ("config.yaml", "events.jsonl", "arch.json", "metrics.json", "model.pt", "run.json"):
        assert (out / f).exists(), f
    assert (out / "checkpoints").is_dir()
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0 <= metrics["val_accuracy"] <= 1 and 0 <= metrics["test_accuracy"] <= 1
    assert metrics["evaluated"] == 30 + 3 * 6
    # printed rounded (no float32 noise), kept whole in metrics.json
    assert not re.search(NOISE, r.output) and re.search(NOISE, (out / "metrics.json").read_text())
    # the same run directory cannot be reused
    r = runner.invoke(app, ["search", str(tiny_recipe), "--out", str(out)])
    assert r.exit_code == 2 and "already holds a run" in r.output

    r = run("evaluate", str(out))
    assert r.exit_code == 0
    ev = json.loads(r.output)
    assert ev["test_accuracy"] == pytest.approx(metrics["test_accuracy"], abs=1e-5)
    assert not re.search(NOISE, r.output)

    r = run("retrain", str(out), "--seeds", "2", "--set", "retrain.epochs=5")
    assert r.exit_code == 0, r.output
    assert not re.search(NOISE, r.output)
    summary = json.loads((out / "retrain" / "digits-graph" / "supernet" / "summary.json").read_text())
    assert summary["seeds"] == 2 and len(summary["per_seed"]) == 2
    assert "retrain_digits-graph_supernet_test_accuracy_mean" in json.loads((out / "metrics.json").read_text())
    # other settings never reuse those results: scratch goes to its own folder ...
    r = run("retrain", str(out), "--seeds", "1", "--init", "scratch", "--set", "retrain.epochs=5")
    assert r.exit_code == 0 and (out / "retrain" / "digits-graph" / "scratch" / "seed-0.json").exists()
    # ... and changed settings on the same folder are refused, naming it
    r = runner.invoke(app, ["retrain", str(out), "--seeds", "2", "--set", "retrain.epochs=6"])
    assert r.exit_code == 2 and "holds results made with other retrain settings" in r.output

    r = run("report", str(out))
    assert r.exit_code == 0
    report = (out / "report.md").read_text()
    assert "search_progress.png" in report and "architecture.png" in report and "Retraining" in report
    assert (out / "search_progress.png").stat().st_size > 1000 and (out / "architecture.png").stat().st_size > 1000

    r = run("check-arch", str(out / "arch.json"), str(tiny_recipe))
    assert r.exit_code == 0 and r.output.startswith("ok: L1=")
    bad = json.loads((out / "arch.json").read_text())
    bad["choices"]["layers"][0]["inputs"][0]["op"] = "gcnn"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    r = runner.invoke(app, ["check-arch", str(tmp_path / "bad.json"), str(tiny_recipe)])
    assert r.exit_code == 2 and "unknown operation 'gcnn'" in r.output


def test_version():
    r = run("--version")
    assert r.exit_code == 0 and r.output.startswith("attnas ")


@pytest.mark.parametrize("args, tuned", [
    (["--version"], False),
    (["list", "recipes"], False),
    (["report", "/nonexistent/run"], False),
    (["search"], True),
    (["evaluate", "/nonexistent/run"], True),
])
def test_the_console_script_tunes_the_process_only_for_commands_that_train(monkeypatch, args, tuned):
    calls = []
    monkeypatch.setattr(cpu_busy, "choose_omp_wait_policy", lambda: calls.append("omp"))
    monkeypatch.setattr(allocator, "keep_freed_memory", lambda: calls.append("malloc"))
    monkeypatch.setattr(sys, "argv", ["attnas", *args])
    with pytest.raises(SystemExit):
        cli.main()
    assert calls == (["omp", "malloc"] if tuned else [])


def test_version_imports_no_torch_and_leaves_the_process_alone():
    code = ("import os, sys\n"
            "from attnas.cli import main\n"
            "sys.argv = ['attnas', '--version']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "assert 'OMP_WAIT_POLICY' not in os.environ, 'OMP_WAIT_POLICY set'\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=Path(__file__).parents[1], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("attnas ")


def test_threads_limits_numpys_blas_too():
    """``--threads 1`` holds numpy's BLAS to one thread, and inside
    :func:`attnas.runtime.blas_threads.blas_limited` (table-latent-bo's GP fit) also scipy's own
    OpenBLAS, loaded after the command started."""
    pytest.importorskip("threadpoolctl")
    code = ("import sys\n"
            "from threadpoolctl import threadpool_info\n"
            "from attnas.cli import main\n"
            "sys.argv = ['attnas', '--threads', '1', 'list', 'tasks']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "counts = lambda: sorted({p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'})\n"
            "print('BLAS', counts())\n"
            "import scipy.linalg, sklearn.gaussian_process\n"
            "from attnas.runtime.blas_threads import blas_limited\n"
            "with blas_limited():\n    print('INSIDE', counts())\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=Path(__file__).parents[1], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "BLAS [1]" in proc.stdout
    assert "INSIDE [1]" in proc.stdout


@pytest.mark.parametrize("command, args, target", [
    ("compare", ["compare", "autoattend-digits-quick"], "attnas.comparison.compare"),
    ("retrain", ["retrain", "somewhere"], "attnas.training.retraining.retrain"),
])
def test_a_stopped_command_that_continues_when_run_again_says_so(monkeypatch, command, args, target):
    import importlib

    module, name = target.rsplit(".", 1)

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(module), name, stop)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 130
    assert f"interrupted; the same `attnas {command}` command run again continues it (finished" in result.output


@pytest.mark.parametrize("flags, progress_env, shown", [
    ([], "1", ["info"]), (["-v"], "1", ["debug", "info"]), (["--verbose"], "1", ["debug", "info"]), (["-q"], "1", []),
    (["--quiet"], "1", []), ([], "0", []), (["-v"], "0", ["debug", "info"])])
def test_the_verbosity_switch_sets_what_the_attnas_logger_shows(monkeypatch, flags, progress_env, shown):
    import logging

    from attnas import config

    from attnas.reporting import progress

    seen = {}

    def recipes():  # a library function that talks through its logger while the command runs
        log = logging.getLogger("attnas.config")
        log.debug("note: debug")
        log.info("note: info")
        seen["progress"] = progress.enabled()
        return []

    monkeypatch.setenv("ATTNAS_PROGRESS", progress_env)
    monkeypatch.setattr(config, "list_recipes", recipes)
    r = run(*flags, "list", "recipes")
    assert r.exit_code == 0
    assert [line[len("note: "):] for line in r.output.splitlines() if line.startswith("note: ")] == shown
    assert seen["progress"] == (progress_env == "1" and flags not in (["-q"], ["--quiet"]))
    assert logging.getLogger("attnas").level == logging.NOTSET  # put back when the command ends
    assert all(type(h).__name__ != "_StderrHandler" for h in logging.getLogger("attnas").handlers)


def test_verbose_and_quiet_together_are_refused():
    r = runner.invoke(app, ["-v", "-q", "list", "recipes"])
    assert r.exit_code == 2 and "give --verbose or --quiet, not both" in r.output


def test_offline_flag_forbids_downloads_and_names_the_missing_files(tmp_path, monkeypatch):
    from torch_geometric.datasets import Planetoid

    monkeypatch.delenv("ATTNAS_OFFLINE", raising=False)  # the test set-up sets it; the flag must do it alone

    def no_download(self):
        raise AssertionError("tried to download")

    monkeypatch.setattr(Planetoid, "download", no_download)
    out = tmp_path / "run"
    r = runner.invoke(app, ["--offline", "search", "autoattend-cora-quick", "--data-dir", str(tmp_path / "data"),
                            "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert "missing ind.cora.x" in r.output and "downloads are off (--offline or $ATTNAS_OFFLINE)" in r.output
    assert not out.exists()
