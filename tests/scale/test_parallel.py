"""Parallel executors: Ray gives the same results as one process, survives a killed worker,
and a missing Ray is a clear error.

The tests that use Ray take the ``local_ray`` fixture (``conftest.py``: one local Ray for
the module, skipped when Ray is not installed); the others always run. Faults of Ray
during a retrain: ``tests/scale/test_ray_faults.py``.
"""

from __future__ import annotations

import copy
import json
import shutil
import signal
import sys

import pytest
from attnas import pipeline
from attnas.core.errors import ConfigError, UnsupportedError
from attnas.scale import parallel
from attnas.training import retraining
from attnas_subprocess import run_attnas

#: Tests on a local Ray run on one pytest-xdist worker (``--dist loadgroup``): two Rays
#: started at once by two workers would compete for the same cores.
pytestmark = pytest.mark.xdist_group("ray")

TIMING = {"search_seconds"}


def small_recipe(base: dict) -> dict:
    r = copy.deepcopy(base)
    r["strategy"] = {"name": "one-shot-evolution", "supernet": {"epochs": 3, "checkpoint_every": 3},
                     "evolution": {"population": 8, "parents": 2, "children": 2, "rounds": 2, "checkpoint_every": 3},
                     "rerank": {"top_k": 2, "epochs": 1}}
    r["retrain"] = {"epochs": 2, "patience": 0, "init": "supernet", "seeds": 2}
    return r


@pytest.fixture(scope="module")
def recipe(tiny_recipe_data):
    return small_recipe(tiny_recipe_data)


@pytest.fixture(scope="module")
def sequential_run(recipe, tmp_path_factory):
    return pipeline.search(recipe, out=tmp_path_factory.mktemp("seq") / "run")


def same_result(a, b) -> None:
    """Same candidates with the same scores, same arch.json, same metrics (timings aside)."""
    assert [(e["index"], e["arch"], e["accuracy"]) for e in a.events("evolution")] == \
           [(e["index"], e["arch"], e["accuracy"]) for e in b.events("evolution")]
    assert json.loads(a.file("arch.json").read_text()) == json.loads(b.file("arch.json").read_text())
    ma, mb = (json.loads(r.file("metrics.json").read_text()) for r in (a, b))
    assert {k: v for k, v in ma.items() if k not in TIMING} == {k: v for k, v in mb.items() if k not in TIMING}


def test_chunks_are_contiguous_and_cover_everything():
    items = list(range(11))
    parts = parallel.chunks(items, 4)
    assert [len(p) for p in parts] == [3, 3, 3, 2] and sum(parts, []) == items
    assert parallel.chunks([1], 8) == [[1]] and parallel.chunks([], 3) == []


def test_sequential_executor_and_bad_worker_counts():
    ex = parallel.make_executor(None)
    assert not ex.parallel and ex.map(pow, [1, 2, 3], 2) == [1, 4, 9]
    assert isinstance(parallel.make_executor(1), parallel.SequentialExecutor)
    for bad in (0, -2):
        with pytest.raises(ConfigError, match="--workers must be an integer >= 1"):
            parallel.make_executor(bad)


def test_ray_executor_keeps_order_and_reraises_errors(local_ray):
    import operator

    from attnas.config import load_config

    assert local_ray.parallel and local_ray.workers == 2
    ref = local_ray.put(5)  # into the object store once, shared by every task
    assert local_ray.map(operator.add, list(range(6)), ref) == [5, 6, 7, 8, 9, 10]
    # (worker functions must be importable by the workers: test-module functions are not)
    with pytest.raises(ConfigError, match="required key is missing"):
        local_ray.map(load_config, [{"name": "x", "task": {}}, {"task": {}}])
    with pytest.raises(ZeroDivisionError):
        local_ray.map(operator.truediv, [1, 2], 0)


def test_a_head_that_does_not_answer_stops_put_and_submit_with_one_line(local_ray):
    """Before an object is put or a task submitted, the executor checks that the head answers:
    a ``ray.put`` to a dead head used to end the process with no message (a head killed for
    real: tests/scale/test_ray_faults.py). Here the executor is pointed at a port nobody listens on."""
    import operator
    import re
    import socket

    from attnas.core.errors import WorkerError

    with socket.socket() as s:  # a free port, closed again: connecting to it is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    head, submitted = local_ray._head, local_ray._submitted
    local_ray._head = ("127.0.0.1", port)
    try:
        message = re.escape(f"lost the local Ray: its head (127.0.0.1:{port}) does not answer (") + \
            r".+\); what finished is kept, run the command again to continue"
        with pytest.raises(WorkerError, match=message):
            local_ray.put(5)
        with pytest.raises(WorkerError, match=message):
            local_ray.map(operator.add, [1, 2], 3)
        assert local_ray._submitted == submitted  # nothing was sent
    finally:
        local_ray._head = head
    assert local_ray.map(operator.add, [1, 2], 3) == [4, 5]  # the real head answers


def test_a_head_lost_while_a_result_is_awaited_stops_with_one_line(local_ray):
    """While a result is awaited, the executor checks every ``poll_seconds`` that the head
    still answers: a task submitted to a live head whose head then stops answering ends the
    wait with one line (Ray alone would wait a minute and end the process with its own log
    line). A head killed for real mid-retrain: tests/scale/test_ray_faults.py (``-m extended``)."""
    import re
    import socket
    import time

    from attnas.core.errors import WorkerError

    with socket.socket() as s:  # a free port, closed again: connecting to it is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    head, poll = local_ray._head, local_ray.poll_seconds
    (ref,) = local_ray._submit(time.sleep, [1.5], ())  # submitted while the head answers
    local_ray._head, local_ray.poll_seconds = ("127.0.0.1", port), 0.2
    try:
        started = time.monotonic()
        with pytest.raises(WorkerError, match=re.escape(f"lost the local Ray: its head (127.0.0.1:{port}) "
                                                        "does not answer (")):
            local_ray._get(ref)
        assert time.monotonic() - started < 1.5  # found at a poll, before the task could end
    finally:
        local_ray._head, local_ray.poll_seconds = head, poll
    assert local_ray._get(ref) is None  # the real head answers: the task ran to its end


def test_parallel_scoring_equals_sequential(recipe, sequential_run, local_ray, tmp_path):
    run = pipeline.search(recipe, out=tmp_path / "run", workers=2)
    same_result(run, sequential_run)
    info = run.read_json("run.json")
    assert info["workers"] == 2 and info["ray_address"] is None


def test_killed_ray_worker_is_rerun_with_the_same_result(recipe, sequential_run, local_ray, tmp_path, monkeypatch):
    marker = tmp_path / "worker-fault-happened"
    monkeypatch.setenv("ATTNAS_WORKER_FAULT", f"3:{marker}")
    run = pipeline.search(recipe, out=tmp_path / "run", workers=2)
    assert marker.exists()  # the worker running the 3rd task really SIGKILLed itself ...
    same_result(run, sequential_run)  # ... and its chunk was re-run by a fresh worker


def test_killed_search_resumed_with_other_workers(recipe, sequential_run, local_ray, tmp_path):
    import yaml

    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "run"
    import torch

    # as many torch threads as this process (which made sequential_run): CPU results are
    # bit-identical only for the same thread count
    killed = run_attnas("search", str(path), "--out", str(out), fault="evolution:5", check=False,
                        threads=torch.get_num_threads())
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    run = pipeline.resume(out, workers=2)  # killed sequential, resumed on 2 workers
    same_result(run, sequential_run)
    assert [e["index"] for e in run.events("evolution")] == list(range(12))
    assert run.read_json("run.json")["workers"] == 2


def test_parallel_retrain_equals_sequential(sequential_run, local_ray, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sequential_run.path, a)
    shutil.copytree(sequential_run.path, b)
    for p in (a, b):
        (p / ".lock").unlink(missing_ok=True)
    seq = retraining.retrain(a, seeds=3)
    par = retraining.retrain(b, seeds=3, workers=2)
    assert _untimed(seq["per_seed"]) == _untimed(par["per_seed"])
    assert seq["test_accuracy_mean"] == par["test_accuracy_mean"]
    assert json.loads((b / "run.json").read_text())["retrain"] == {"workers": 2, "ray_address": None}
    # one seed alone gives the same row as within a run of several (no hidden state between seeds)
    c = tmp_path / "c"
    shutil.copytree(a, c)
    (c / "retrain" / "digits-graph" / "supernet" / "seed-1.json").unlink()  # now the first one trained
    assert _untimed(retraining.retrain(c, seeds=3)["per_seed"]) == _untimed(seq["per_seed"])


def _untimed(rows: list[dict]) -> list[dict]:
    """Retraining rows without their wall time (the one field that may differ between runs)."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_sweep_parallel_equals_sequential_and_continues(recipe, local_ray, tmp_path):
    from attnas.scale.sweep import sweep

    small = copy.deepcopy(recipe)
    small["strategy"]["supernet"]["epochs"] = 2
    small["strategy"]["rerank"]["epochs"] = 0
    grid = ["space.hidden=[8, 16]"]
    seq = sweep(small, seeds=2, grid=grid, out=tmp_path / "seq")
    par = sweep(small, seeds=2, grid=grid, out=tmp_path / "par", workers=2)
    names = [r["name"] for r in seq["runs"]]
    assert names == ["000_hidden-8_seed-0", "001_hidden-8_seed-1", "002_hidden-16_seed-0", "003_hidden-16_seed-1"]
    for folder in ("seq", "par"):
        assert all((tmp_path / folder / n / "arch.json").exists() for n in names)

    def strip(rows):
        return [{**r, "metrics": {k: v for k, v in r["metrics"].items() if k not in TIMING}} for r in rows]

    assert strip(seq["runs"]) == strip(par["runs"])
    assert [p["point"] for p in seq["points"]] == [["space.hidden=8"], ["space.hidden=16"]]
    p0 = seq["points"][0]
    accs = [r["metrics"]["test_accuracy"] for r in seq["runs"][:2]]
    assert p0["test_accuracy_mean"] == pytest.approx(sum(accs) / 2)
    # the same sweep again continues (here: nothing left to do); another plan is refused
    again = sweep(small, seeds=2, grid=grid, out=tmp_path / "seq")
    assert again["runs"] == seq["runs"]
    from attnas.core.errors import RunDirError

    with pytest.raises(RunDirError, match="holds another sweep"):
        sweep(small, seeds=3, grid=grid, out=tmp_path / "seq")


def test_bad_sweep_writes_nothing(recipe, tmp_path):
    from attnas.scale.sweep import sweep

    for grid, message in ((["space.hidden=16"], "expected a list of values"),
                          (["space.hiden=[8, 16]"], "space.hiden: unknown key"),
                          (["space.hidden=[8, x]"], "space.hidden: expected an integer")):
        with pytest.raises(ConfigError, match=message):
            sweep(recipe, grid=grid, out=tmp_path / "s")
    with pytest.raises(ConfigError, match="--seeds must be an integer >= 1"):
        sweep(recipe, seeds=0, out=tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_bad_or_unreachable_ray_address_fails_fast(recipe, tmp_path):
    from attnas.scale.distributed import free_port
    from attnas.core.errors import AttnasError

    with pytest.raises(ConfigError, match="expected host:port or ray://host:port"):
        pipeline.search(recipe, out=tmp_path / "run", ray_address="nohost")
    assert not (tmp_path / "run").exists()
    # (checked before Ray starts; here the module's local Ray is running, so call the check itself)
    with pytest.raises(AttnasError, match=r"cannot reach the Ray cluster at ray://127\.0\.0\.1:\d+"):
        parallel._check_reachable(f"ray://127.0.0.1:{free_port()}")


def test_sweep_command_line(recipe, tmp_path):
    import yaml
    from typer.testing import CliRunner

    from attnas.cli import app

    small = copy.deepcopy(recipe)
    small["strategy"]["supernet"]["epochs"] = 2
    small["strategy"]["rerank"]["epochs"] = 0
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(small))
    r = CliRunner().invoke(app, ["sweep", str(path), "--seeds", "2", "--set", "retrain.epochs=2",
                                 "--out", str(tmp_path / "sw")])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("(recipe): ") and "test_accuracy=" in r.output and "[2 runs]" in r.output
    summary = json.loads((tmp_path / "sw" / "summary.json").read_text())
    assert [x["name"] for x in summary["runs"]] == ["000_seed-0", "001_seed-1"]
    assert all(x["metrics"]["final_epochs"] == 2 for x in summary["runs"])


def test_workers_without_ray_name_the_extra(recipe, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now fails as if not installed
    for call in (lambda: pipeline.search(recipe, out=tmp_path / "run", workers=2),
                 lambda: parallel.make_executor(address="ray://head:10001")):
        with pytest.raises(UnsupportedError, match=r'pip install "attnas\[ray\]"'):
            call()
    assert not (tmp_path / "run").exists()
    assert not parallel.make_executor(1).parallel  # one worker needs no Ray


def test_ray_poll_seconds_from_the_environment(monkeypatch):
    monkeypatch.delenv("ATTNAS_RAY_POLL_SECONDS", raising=False)
    assert parallel._poll_seconds(2.0) == 2.0  # the default
    monkeypatch.setenv("ATTNAS_RAY_POLL_SECONDS", "0.5")
    assert parallel._poll_seconds(2.0) == 0.5
    for bad in ("0", "-1", "x", "inf", "nan"):
        monkeypatch.setenv("ATTNAS_RAY_POLL_SECONDS", bad)
        with pytest.raises(ConfigError, match="ATTNAS_RAY_POLL_SECONDS"):
            parallel._poll_seconds(2.0)
