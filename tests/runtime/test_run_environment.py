"""run.json records what a result depends on besides the config (versions, torch threads,
compiled kernels); ``attnas search --resume`` refuses a process that differs, unless ``--force``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from attnas import kernels, pipeline
from attnas._version import __version__
from attnas.cli import app
from attnas.runtime import run_environment
from attnas_subprocess import FIXED_GCN

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]



@pytest.fixture
def stopped_run(tmp_path, monkeypatch):
    """A run directory whose search stopped (Ctrl-C) before its final training."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(FIXED_GCN))
    out = tmp_path / "run"

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(pipeline, "train_final", interrupt)
        assert runner.invoke(app, ["search", str(recipe), "--out", str(out)]).exit_code == 130
    return out


def run_json(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


def edit_run_json(out: Path, **fields) -> None:
    info = run_json(out)
    for key, value in fields.items():
        if value is None:
            info.pop(key, None)
        else:
            info[key] = value
    (out / "run.json").write_text(json.dumps(info))


def test_a_new_run_records_versions_threads_and_kernels(stopped_run):
    info = run_json(stopped_run)
    assert info["attnas_version"] == __version__ and info["torch"] == torch.__version__
    assert info["torch_threads"] == torch.get_num_threads()
    assert info["kernels"] == run_environment.enabled_kernels()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # tests run from a checkout
        assert info["attnas_commit"] == head.stdout.strip()


def test_the_commit_is_recorded_but_not_compared(stopped_run):
    edit_run_json(stopped_run, attnas_commit="0" * 40)  # e.g. work in progress was committed since
    pipeline.resume(stopped_run)
    assert run_json(stopped_run)["status"] == "finished" and "forced_resumes" not in run_json(stopped_run)


def test_a_finished_run_resumes_to_nothing_without_a_check(stopped_run, restore_torch_threads):
    pipeline.resume(stopped_run)
    before = (stopped_run / "metrics.json").read_text()
    edit_run_json(stopped_run, torch="1.0.0")
    r = runner.invoke(app, ["search", "--resume", str(stopped_run)])
    assert r.exit_code == 0, r.output
    assert (stopped_run / "metrics.json").read_text() == before


def test_the_commit_is_read_only_from_a_source_checkout(tmp_path):
    assert run_environment.git_commit(tmp_path) is None  # no pyproject.toml, no .git
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / ".git").mkdir()
    assert run_environment.git_commit(tmp_path) is None  # git refuses: not a repository


def test_resume_with_other_threads_is_refused_in_one_line_and_force_records_it(stopped_run, restore_torch_threads):
    before = (stopped_run / "run.json").read_text()
    threads = torch.get_num_threads()
    r = runner.invoke(app, ["--threads", str(threads + 1), "search", "--resume", str(stopped_run)])
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert f"torch_threads: the run was made with {threads}, this process has {threads + 1}" in lines[0]
    assert "--force" in lines[0]
    assert (stopped_run / "run.json").read_text() == before and not (stopped_run / "metrics.json").exists()

    r = runner.invoke(app, ["--threads", str(threads + 1), "search", "--resume", str(stopped_run), "--force"])
    assert r.exit_code == 0, r.output
    info = run_json(stopped_run)
    assert info["status"] == "finished" and info["torch_threads"] == threads + 1
    (forced,) = info["forced_resumes"]
    assert forced["changes"] == {"torch_threads": [threads, threads + 1]}


def test_resume_with_kernels_switched_off_is_refused(stopped_run):
    if not run_json(stopped_run)["kernels"]:
        pytest.skip("no compiled kernels are registered in this process")
    kernels.disable()
    try:
        with pytest.raises(Exception, match=r"kernels: the run was made with .*dropout.*, this process has none"):
            pipeline.resume(stopped_run)
    finally:
        kernels.enable()
    pipeline.resume(stopped_run)
    assert run_json(stopped_run)["status"] == "finished"


@pytest.mark.parametrize("field, recorded, message", [
    ("attnas_version", "0.0.1", f"attnas_version: the run was made with 0.0.1, this process has {__version__}"),
    ("torch", "1.0.0", f"torch: the run was made with 1.0.0, this process has {torch.__version__}"),
])
def test_resume_with_other_versions_is_refused(stopped_run, field, recorded, message):
    edit_run_json(stopped_run, **{field: recorded})
    r = runner.invoke(app, ["search", "--resume", str(stopped_run)])
    assert r.exit_code == 2 and message in r.output, r.output


def test_an_old_run_json_without_the_fields_resumes(stopped_run, restore_torch_threads):
    edit_run_json(stopped_run, torch_threads=None, kernels=None, attnas_commit=None, torch=None)
    torch.set_num_threads(torch.get_num_threads() + 1)  # not recorded: not compared
    run = pipeline.resume(stopped_run)
    info = run.read_json("run.json")
    assert info["status"] == "finished" and "forced_resumes" not in info
    assert info["torch_threads"] == torch.get_num_threads()  # recorded now, for a later resume


def test_the_kernel_state_comes_from_the_switches_without_building_anything(tmp_path):
    code = ("import attnas.runs.build, attnas.kernels._build as b\n"
            "b.Library.load = lambda self: (_ for _ in ()).throw(AssertionError('built ' + self.name))\n"
            "from attnas.runtime.run_environment import enabled_kernels\n"
            "print(','.join(enabled_kernels()))\n")
    def kernels_with(**env):
        environ = {k: v for k, v in os.environ.items() if k not in ("ATTNAS_NO_KERNELS", "ATTNAS_DISABLE_KERNELS")}
        proc = subprocess.run([sys.executable, "-c", code], env={**environ, **env}, cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip().split(",") if proc.stdout.strip() else []

    assert kernels_with() == sorted(kernels.KERNELS)
    assert kernels_with(ATTNAS_NO_KERNELS="1") == []
    assert kernels_with(ATTNAS_DISABLE_KERNELS="dropout,small_conv") == sorted(set(kernels.KERNELS) - {"dropout", "small_conv"})
