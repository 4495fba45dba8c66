"""Real kills (SIGKILL) at the points between files, then a resume that ends as the
uninterrupted run: during a checkpoint write, during the write of ``model.pt``, between
``model.pt`` and ``metrics.json``, and in the middle of a ``sweep``.

Kills after an event of a phase: ``tests/test_resume.py``; damaged checkpoints:
``tests/test_faults.py``.

Only the killed runs are children; the uninterrupted references and the resumes
(``attnas.pipeline.resume`` and ``attnas.scale.sweep.sweep``, what ``attnas search --resume`` and
``attnas sweep`` run) run in the test's process, on one thread as the children: a child's
start-up costs seconds per call.
"""

from __future__ import annotations

import json
import signal

import pytest
import torch
import yaml
from attnas_subprocess import killed_at_replace, resume_here, run_attnas, search_here

TINY = {
    "name": "tiny-kill",
    "task": {"name": "node-classification", "dataset": "digits-graph"},
    "space": {"name": "autoattend", "layers": 2, "hidden": 8, "pool": "pyg", "ops": ["zero", "identity", "gcn"],
              "heads": 2, "op_heads": 2},
    "strategy": {"name": "one-shot-evolution", "supernet": {"epochs": 6, "checkpoint_every": 2},
                 "evolution": {"population": 6, "parents": 2, "children": 2, "rounds": 1, "checkpoint_every": 3},
                 "rerank": {"top_k": 2, "epochs": 1}},
    "retrain": {"epochs": 4, "patience": 0, "init": "supernet"},
}
TIMING = {"search_seconds"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return search_here(tmp_path_factory.mktemp("reference"), TINY, threads=1)


def sweep_here(recipe, out, seeds: int) -> None:
    """``attnas --threads 1 sweep RECIPE --seeds SEEDS --out OUT``, in this process."""
    from attnas.scale.sweep import sweep

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sweep(recipe, seeds=seeds, out=out)
    finally:
        torch.set_num_threads(before)


def events(run) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def same_result(run, ref) -> None:
    assert json.loads((run / "arch.json").read_text()) == json.loads((ref / "arch.json").read_text())
    m_run, m_ref = (json.loads((p / "metrics.json").read_text()) for p in (run, ref))
    assert {k: v for k, v in m_run.items() if k not in TIMING} == {k: v for k, v in m_ref.items() if k not in TIMING}
    ev = events(run)
    assert [e["epoch"] for e in ev if e["phase"] == "supernet"] == [1, 2, 3, 4, 5, 6]
    assert [e["index"] for e in ev if e["phase"] == "evolution"] == list(range(8))
    assert [e["phase"] for e in ev].count("search-done") == 1
    assert [e["epoch"] for e in ev if e["phase"] == "final"] == [1, 2, 3, 4]


@pytest.mark.parametrize("name, count, left", [
    ("*.ckpt", 2, "the epoch-4 supernet checkpoint, whole but not yet renamed"),
    ("model.pt", 1, "model.pt, whole but not yet renamed"),
    ("metrics.json", 1, "model.pt written, metrics.json not"),
])
def test_a_kill_between_files_resumes_to_the_same_result(reference, tmp_path, name, count, left):
    recipe, ref = reference
    out = tmp_path / "run"
    killed = killed_at_replace(name, count, "search", str(recipe), "--out", str(out))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (out / "metrics.json").exists()
    temporaries = [p for folder in (out, out / "checkpoints") for p in folder.glob(".*.tmp-*")]
    assert len(temporaries) == 1, temporaries  # the write the kill cut short
    if name == "metrics.json":
        assert (out / "model.pt").exists()
    resume_here(out, threads=1)
    same_result(out, ref)
    assert not [p for folder in (out, out / "checkpoints") for p in folder.glob(".*.tmp-*")]


def test_a_half_done_sweep_continues_to_the_same_summary(tmp_path):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(TINY))
    args = ["sweep", str(recipe), "--seeds", "2"]
    sweep_here(recipe, tmp_path / "whole", seeds=2)
    # killed in the second run's supernet training (the first run logged 6 supernet epochs)
    out = tmp_path / "half"
    killed = run_attnas(*args, "--out", str(out), fault="supernet:9", check=False, threads=1)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    first, second = out / "000_seed-0", out / "001_seed-1"
    assert (first / "metrics.json").exists() and not (second / "metrics.json").exists()
    finished_before = (first / "metrics.json").stat().st_mtime_ns
    sweep_here(recipe, out, seeds=2)
    assert (first / "metrics.json").stat().st_mtime_ns == finished_before  # the finished run was kept, not redone
    whole, half = (json.loads((p / "summary.json").read_text()) for p in (tmp_path / "whole", out))

    def untimed(summary):
        return [{**r, "metrics": {k: v for k, v in r["metrics"].items() if k not in TIMING}} for r in summary["runs"]]

    assert untimed(half) == untimed(whole)
    assert [e["epoch"] for e in events(second) if e["phase"] == "supernet"] == [1, 2, 3, 4, 5, 6]
