"""Ray faults during ``attnas retrain``, ``search`` and ``sweep`` with ``--workers 2``: a
worker killed in the middle of a seed is replaced and the seed re-run, with the
uninterrupted result; a seed whose worker dies on every try, or a Ray whose head is gone,
ends the command with one line (exit status 1), everything finished kept, and the command
run again (``search --resume``) ends as the uninterrupted one.

The worker running the n-th task SIGKILLs itself (``ATTNAS_WORKER_FAULT``, see
:mod:`attnas.scale.parallel`); a head is lost by killing a child process's own local Ray.
Skipped without Ray. A killed worker during a search's scoring: ``tests/scale/test_parallel.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest
import torch
from attnas.scale import parallel
from attnas_subprocess import FIXED_GCN, recipe_file

#: Tests on a local Ray run on one pytest-xdist worker (``--dist loadgroup``): two Rays

from attnas import pipeline
from attnas.training import retraining
#: started at once by two workers would compete for the same cores.
pytestmark = pytest.mark.xdist_group("ray")


def untimed(summary: dict) -> dict:
    """A retrain summary without the seeds' wall times."""
    return {**summary, "per_seed": [{k: v for k, v in r.items() if k != "seconds"} for r in summary["per_seed"]]}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished fixed-GCN run (never retrained) and the summary of its sequential 3-seed retrain."""
    folder = tmp_path_factory.mktemp("ray-faults")
    pipeline.search(FIXED_GCN, out=folder / "run")
    shutil.copytree(folder / "run", folder / "sequential")
    return folder / "run", retraining.retrain(folder / "sequential", seeds=3)


HEAD_GONE = (r"error: lost the local Ray: its head \(\S+:\d+\) does not answer \(.+\); what finished is "
             r"kept, run the command again to continue")


def lose_the_head(args: list[str], ready, meanwhile=lambda: None, then: str = "") -> tuple[int, str, float]:
    """Run ``python -m attnas --threads 1 ARGS`` in a child process and, once ``ready()``,
    SIGKILL the child's own local Ray (its GCS, raylet and workers: the child's
    descendants, nothing else). ``meanwhile()`` runs here while the child notices. The
    child's one error line must be the lost-head line followed by exactly ``then``.

    Returns:
        The child's exit status, its stderr and the seconds from the kill to its end.
    """
    psutil = pytest.importorskip("psutil")
    # the head is checked every 0.5 s instead of 2 s (each result still awaited finds it gone)
    env = dict(os.environ, ATTNAS_PROGRESS="0", ATTNAS_RAY_POLL_SECONDS="0.5")
    env.pop("ATTNAS_WORKER_FAULT", None)
    child = subprocess.Popen([sys.executable, "-m", "attnas", "--threads", "1", *args], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ended: dict = {}

    def wait_for_the_child():
        try:
            ended["stderr"] = child.communicate(timeout=50)[1]  # Ray alone would end the child after 60 s
        finally:
            ended["at"] = time.monotonic()

    waiter = threading.Thread(target=wait_for_the_child, daemon=True)
    try:
        deadline = time.monotonic() + 300  # Ray's start on a loaded machine
        while not ready() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.poll() is None and ready(), "the child ended before the kill"
        for p in psutil.Process(child.pid).children(recursive=True):
            p.kill()
        killed = time.monotonic()
        waiter.start()
        meanwhile()
        waiter.join()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "stderr" in ended, "the child did not end within 50 s"
    stderr = ended["stderr"]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and re.fullmatch(HEAD_GONE + re.escape(then), errors[0]) and "Traceback" not in stderr, \
        f"exit status {child.returncode}; stderr: {stderr!r}"
    return child.returncode, stderr, ended["at"] - killed


# about 30 s on a loaded 2-core machine (two minutes when the other pytest worker is busy),
# most of it the child's Ray starting. Not in the default run (pytest -m extended): on a
# loaded CI machine it once saw the child end with an empty stderr, cause not found (the
# assertion now shows the exit status). The executor's check of a head lost while a result
# is awaited is tests/scale/test_parallel.py's, on the shared local Ray.
@pytest.mark.extended
@pytest.mark.slow
def test_a_ray_head_gone_mid_retrain_is_one_line_within_seconds_and_the_retrain_continues(finished, tmp_path,
                                                                                         restore_torch_threads):
    """``attnas retrain --workers 2`` whose local Ray is killed once seed 0 is written stops
    with one line, before Ray's own minute-long wait ends it, and the retrain run again
    ends as the uninterrupted one."""
    pytest.importorskip("ray")
    run, _ = finished
    longer = ["--seeds", "3", "--set", "retrain.epochs=60"]  # seconds a seed: seed 2 runs at the kill
    out = tmp_path / "run"
    shutil.copytree(run, out)
    folder = out / "retrain" / "digits-graph" / "scratch"
    reference = {}

    def train_the_reference():  # uninterrupted, trained here while the child notices and stops
        torch.set_num_threads(1)  # as the child (--threads 1): the same floats
        shutil.copytree(run, tmp_path / "reference")
        reference["summary"] = retraining.retrain(tmp_path / "reference", seeds=3, overrides=["retrain.epochs=60"])

    status, stderr, seconds = lose_the_head(["retrain", str(out), "--workers", "2", *longer],
                                            ready=lambda: (folder / "seed-0.json").exists(),
                                            meanwhile=train_the_reference)
    assert status == 1, stderr
    assert seconds < 30, seconds
    done = sorted(p.name for p in folder.iterdir())
    assert "seed-0.json" in done and "seed-2.json" not in done and not list(out.rglob(".*.tmp-*")), done
    kept = {f: (folder / f).stat().st_mtime_ns for f in done}
    summary = retraining.retrain(out, seeds=3, overrides=["retrain.epochs=60"])  # run again: the seeds left
    assert {f: (folder / f).stat().st_mtime_ns for f in kept} == kept
    assert untimed(summary) == untimed(reference["summary"])


# about 50 s, most of it the child's Ray starting; the check before Ray's first use is
# tests/scale/test_parallel.py's (a head that does not answer), the wait for a result on a head
# killed for real the retrain test's above: not in the default run (pytest -m extended)
@pytest.mark.extended
@pytest.mark.slow
def test_a_ray_head_gone_before_a_search_scores_is_one_line_and_the_search_resumes(tiny_recipe_data, tmp_path,
                                                                                   restore_torch_threads):
    """``attnas search --workers 2`` whose local Ray is killed while the supernet trains (here,
    without Ray) stops with one line at its first use of Ray (a ``ray.put`` to a dead head
    used to end the process with no message), the run marked failed; resumed without
    workers it ends as the uninterrupted search."""
    pytest.importorskip("ray")
    recipe, path = recipe_file(tmp_path, tiny_recipe_data, supernet={"epochs": 60, "checkpoint_every": 20})
    out = tmp_path / "run"
    events = out / "events.jsonl"
    status, stderr, _ = lose_the_head(["search", str(path), "--out", str(out), "--workers", "2"],
                                      ready=lambda: events.exists() and '"supernet"' in events.read_text(),
                                      then=f"; the run is kept: `attnas search --resume {out}` continues it")
    assert status == 1, stderr
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    assert not list(out.rglob(".*.tmp-*"))
    torch.set_num_threads(1)  # as the child: the same floats
    resumed = pipeline.resume(out)
    reference = pipeline.search(recipe, out=tmp_path / "reference")
    assert resumed.file("arch.json").read_text() == reference.file("arch.json").read_text()
    assert [(e["arch"], e["accuracy"]) for e in resumed.events("evolution")] == \
           [(e["arch"], e["accuracy"]) for e in reference.events("evolution")]


# about 60 s, most of it the child's Ray starting; the lost head is found by the executor's
# wait that the retrain test above covers, and a half-done sweep's continuation is
# tests/test_kill_points.py's: not in the default run (pytest -m extended)
@pytest.mark.extended
@pytest.mark.slow
def test_a_ray_head_gone_mid_sweep_is_one_line_and_the_sweep_run_again_completes_it(tiny_recipe_data, tmp_path,
                                                                                    restore_torch_threads):
    """``attnas sweep --workers 2`` whose local Ray is killed once its first search is done
    (the searches on Ray's workers die with it) stops with one line; the same sweep run
    again keeps the finished search and ends as the uninterrupted sweep."""
    pytest.importorskip("ray")
    from attnas.scale.sweep import sweep

    # searches of a few seconds: five of them run here after the child (the sweep continued, the reference)
    base = {**tiny_recipe_data, "retrain": {**tiny_recipe_data["retrain"], "epochs": 5, "seeds": 1}}
    recipe, path = recipe_file(tmp_path, base, supernet={"epochs": 20, "checkpoint_every": 10},
                               evolution={"population": 12, "parents": 4, "children": 4, "rounds": 2,
                                          "checkpoint_every": 7},
                               rerank={"top_k": 2, "epochs": 0})
    out = tmp_path / "sweep"
    first = out / "000_seed-0" / "metrics.json"
    seeds = 3  # two at once on the 2 workers: a search is left to run when the first ends
    reference = {}

    def sweep_the_reference():  # uninterrupted, here while the child notices and stops
        torch.set_num_threads(1)  # as the child's workers: the same floats
        reference["summary"] = sweep(recipe, seeds=seeds, out=tmp_path / "reference")

    status, stderr, seconds = lose_the_head(["sweep", str(path), "--seeds", str(seeds), "--out", str(out),
                                             "--workers", "2"], ready=first.exists, meanwhile=sweep_the_reference)
    assert status == 1, stderr
    assert seconds < 30, seconds
    assert not (out / "summary.json").exists() and not list(out.rglob(".*.tmp-*"))
    kept = first.stat().st_mtime_ns
    again = sweep(recipe, seeds=seeds, out=out)
    assert first.stat().st_mtime_ns == kept

    def results(summary):
        return [(r["name"], {k: v for k, v in r["metrics"].items() if k != "search_seconds"})
                for r in summary["runs"]]

    assert results(again) == results(reference["summary"])


def test_a_ray_worker_killed_during_a_seed_is_replaced_with_the_same_result(finished, local_ray, tmp_path,
                                                                             monkeypatch):
    run, sequential = finished
    out = tmp_path / "run"
    shutil.copytree(run, out)
    marker = tmp_path / "worker-fault-happened"
    monkeypatch.setenv("ATTNAS_WORKER_FAULT", f"2:{marker}")  # the worker training seed 1
    summary = retraining.retrain(out, seeds=3, workers=2)
    assert marker.exists()  # the worker really SIGKILLed itself ...
    assert untimed(summary) == untimed(sequential)  # ... and seed 1 was re-run by a fresh one


def test_a_seed_whose_worker_keeps_dying_fails_in_one_line_and_loses_no_finished_seed(finished, local_ray, tmp_path,
                                                                                      monkeypatch):
    from typer.testing import CliRunner

    from attnas.cli import app

    run, sequential = finished
    out = tmp_path / "run"
    shutil.copytree(run, out)

    def no_retries(workers=None, address=None, threads=None, check_only=False):
        return None if check_only else parallel.RayExecutor(workers, address, threads, retries=0)

    monkeypatch.setattr(retraining, "make_executor", no_retries)
    monkeypatch.setenv("ATTNAS_WORKER_FAULT", f"2:{tmp_path / 'worker-fault-happened'}")  # seed 1, no re-run
    r = CliRunner().invoke(app, ["retrain", str(out), "--seeds", "3", "--workers", "2"])
    assert r.exit_code == 1, r.output
    # attnas's one line (Ray itself may add its own report of the dead worker, prefixed "(raylet)")
    errors = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in r.output, r.output
    assert re.fullmatch(r"error: a Ray worker died 1 time running one task \(\w+\); see the Ray logs", errors[0])
    folder = out / "retrain" / "digits-graph" / "scratch"
    assert sorted(p.name for p in folder.iterdir()) == ["seed-0.json", "seed-2.json"]  # seed 2 finished after it
    assert not list(out.rglob(".*.tmp-*"))
    kept = {f: (folder / f).stat().st_mtime_ns for f in ("seed-0.json", "seed-2.json")}
    monkeypatch.undo()
    summary = retraining.retrain(out, seeds=3)  # run again: trains seed 1 alone
    assert {f: (folder / f).stat().st_mtime_ns for f in kept} == kept
    assert untimed(summary) == untimed(sequential)
    assert json.loads((out / "metrics.json").read_text())["retrain_digits-graph_scratch_seeds"] == 3
