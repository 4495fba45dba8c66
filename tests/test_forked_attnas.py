"""The tests' forked ``attnas`` children (``tests/forked_attnas.py``) behave as new Pythons:
the same output and exit status for the same command line, their own process to kill, and
a real child wherever a fork would differ."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import yaml
from attnas_subprocess import FIXED_GCN
from forked_attnas import start_forked, why_not_forked


def forked(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``command`` run in a forked child (which it must be)."""
    child = start_forked(command, env)
    assert child is not None, f"the command line was not forked: {why_not_forked(env)}"
    return child.run(timeout=300)


def both(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """``command`` forked and as a new Python."""
    return forked(command, env), subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_a_forked_child_starts_with_attnas_and_torch_imported():
    proc = forked([sys.executable, "-c", "import sys; print(sorted({'torch', 'torch_geometric', "
                   "'attnas.pipeline', 'sklearn'} & set(sys.modules)))"], dict(os.environ))
    assert proc.returncode == 0 and proc.stdout == "['attnas.pipeline', 'sklearn', 'torch', 'torch_geometric']\n", proc


def test_output_and_exit_status_are_those_of_a_new_python(tmp_path):
    env = dict(os.environ)
    for args in (["--version"], ["search", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "run")],
                 ["list", "nothing-of-that-name"], ["search", "--no-such-option"]):
        forked, new = both([sys.executable, "-m", "attnas", *args], env)
        assert (forked.returncode, forked.stdout, forked.stderr) == (new.returncode, new.stdout, new.stderr), args
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(sys.argv[1:])"
    forked, new = both([sys.executable, "-c", code, "a", "b"], env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (new.returncode, new.stdout, new.stderr) == \
           (1, "out\n", "err\n['a', 'b']\n")


def test_a_fault_kills_the_child_alone_and_the_working_folder_and_environment_are_the_childs(tmp_path, monkeypatch):
    recipe = tmp_path / "fixed.yaml"
    recipe.write_text(yaml.safe_dump({**FIXED_GCN, "retrain": {"epochs": 5, "patience": 0}}))
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, ATTNAS_PROGRESS="0", ATTNAS_FAULT="final:2")
    proc = forked([sys.executable, "-m", "attnas", "--threads", "1", "search", "fixed.yaml", "--out", "run"], env)
    assert proc.returncode == -signal.SIGKILL, proc
    assert (tmp_path / "run" / "run.json").exists() and "ATTNAS_FAULT" not in os.environ


def test_what_a_fork_would_change_runs_as_a_new_python():
    env = dict(os.environ)
    attnas = [sys.executable, "-m", "attnas"]
    assert start_forked([*attnas, "retrain", "run", "--workers", "2"], env) is None  # Ray's shutdown
    assert start_forked([*attnas, "sweep", "r.yaml", "--address=auto"], env) is None
    assert start_forked([*attnas, "--version"], dict(env, ATTNAS_NO_KERNELS="1")) is None  # at import
    assert start_forked([*attnas, "--version"], dict(env, OMP_NUM_THREADS="3")) is None
    assert start_forked(["python2", "-m", "attnas", "--version"], env) is None


def test_a_forked_search_computes_the_same_floats_as_a_new_python(tmp_path, tiny_recipe_data):
    """(With scikit-learn imported before torch in the fork server, this search picked another
    architecture.)"""
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump({**tiny_recipe_data, "retrain": {"epochs": 5, "patience": 0, "seeds": 1}}))
    runs = []
    for name in ("forked", "new"):
        command = [sys.executable, "-m", "attnas", "--threads", "1", "search", str(recipe), "--out", str(tmp_path / name)]
        env = dict(os.environ, ATTNAS_PROGRESS="0")
        proc = forked(command, env) if name == "forked" else \
            subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc
        metrics = json.loads((tmp_path / name / "metrics.json").read_text())
        runs.append(({k: v for k, v in metrics.items() if k != "search_seconds"},
                     (tmp_path / name / "arch.json").read_text()))
    assert runs[0] == runs[1]


def test_a_local_ray_started_earlier_in_the_process_does_not_stop_forking(local_ray):
    """``ray.init`` writes RAY_* and PYTHONBREAKPOINT into this process's environment; tests
    that run after a test's local Ray still fork (they did not when the tests ran in another order)."""
    import ray

    assert ray.is_initialized()
    proc = forked([sys.executable, "-c", "print('forked')"], dict(os.environ))
    assert proc.returncode == 0 and proc.stdout == "forked\n", proc
