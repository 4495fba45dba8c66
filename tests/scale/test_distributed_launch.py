"""Ranks launched as ``torchrun`` launches them (one process each, with ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``) stop together, within seconds and with
the same one-line error, when rank 0 fails a check that only it makes: a search into a
folder that is not an attnas run, a resume of a run another process holds. When another
rank dies mid-run, rank 0 says so in one line and the run resumes.

Without the shared check, rank 1 went on to the next barrier and failed there with gloo's
"Connection closed by peer" (or, under ``torchrun``, was killed with SIGTERM).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import yaml
from attnas_subprocess import FIXED_GCN, recipe_file
from forked_attnas import start_forked

from attnas import pipeline
from attnas.runs.run_dir import RunDir
from attnas.scale import distributed

LIMIT = 90  # seconds for both ranks to start, fail and exit (Python and torch start-up included)


def launch(*args: str, world: int = 2, faults: dict[int, str] | None = None) -> tuple[list[tuple[int, str]], float]:
    """``attnas --threads 1 ARGS`` on ``world`` ranks (forked children where they can be: see
    ``tests/forked_attnas.py``); their ``(exit status, stderr)`` and the seconds taken.

    ``faults`` maps a rank to its ``ATTNAS_FAULT`` (``phase:n``: SIGKILLed after its n-th event of the phase).
    """
    port = str(distributed.free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ, ATTNAS_PROGRESS="0", RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        env.pop("ATTNAS_FAULT", None)
        if faults and rank in faults:
            env["ATTNAS_FAULT"] = faults[rank]
        command = [sys.executable, "-m", "attnas", "--threads", "1", *args]
        procs.append(start_forked(command, env) or subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                                                    stderr=subprocess.PIPE, text=True))
    start = time.monotonic()
    try:
        results = []
        for p in procs:
            _, err = p.communicate(timeout=max(1.0, LIMIT - (time.monotonic() - start)))
            results.append((p.returncode, err))
        return results, time.monotonic() - start
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_search_into_a_foreign_folder_stops_every_rank_with_one_line(tmp_path):
    recipe = tmp_path / "fixed.yaml"
    recipe.write_text(yaml.safe_dump(FIXED_GCN))
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("mine")
    results, seconds = launch("search", str(recipe), "--out", str(foreign))
    line = f"error: {foreign} is not empty and holds no attnas run; choose a new or empty folder with --out\n"
    assert results == [(2, line), (2, line)], results
    assert seconds < LIMIT and sorted(p.name for p in foreign.iterdir()) == ["todo.txt"]


def test_resume_of_a_run_in_use_stops_every_rank_with_one_line(tmp_path):
    run = pipeline.search(FIXED_GCN, out=tmp_path / "run")
    holder = RunDir.open(run.path)
    holder.lock()  # another attnas process, as far as the ranks can tell
    try:
        results, seconds = launch("search", "--resume", str(run.path))
    finally:
        holder.close()
    line = f"error: {run.path} is in use by another attnas process\n"
    assert results == [(2, line), (2, line)], results
    assert seconds < LIMIT


def test_a_rank_killed_mid_supernet_stops_rank_0_with_one_line_and_the_run_resumes(tiny_recipe_data, tmp_path):
    _, path = recipe_file(tmp_path, tiny_recipe_data,
                          supernet={"epochs": 30, "checkpoint_every": 10, "optimizer": "sgd", "lr": 0.05})
    out = tmp_path / "run"
    results, seconds = launch("search", path, "--out", str(out), faults={1: "supernet:15"})
    (status0, err0), (status1, _) = results
    assert status1 == -9 and status0 == 1, results
    assert seconds < LIMIT
    lines = err0.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: another rank of the distributed run stopped (its own output says why); this rank lost it in "
        "all_reduce: ") and lines[0].endswith(f"the run is kept: `attnas search --resume {out}` continues it"), err0
    assert RunDir.open(out).read_json("run.json")["status"] == "failed"
    results, _ = launch("search", "--resume", str(out))  # both ranks again: the run ends
    assert [r[0] for r in results] == [0, 0], results
    assert (out / "metrics.json").exists()
