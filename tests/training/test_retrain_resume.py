"""``attnas retrain`` killed with SIGKILL between its files, then run again, ends as an
uninterrupted retrain: the seeds finished before the kill are kept (not retrained), the
rest are trained, and the summary and ``metrics.json`` are the same; no temporary file of
the cut write is left in the run.

The kills (:func:`attnas_subprocess.killed_at_replace`): as seed 1's result replaces its
temporary file (seed 0 finished), as ``summary.json`` is written (every seed finished),
and as ``metrics.json`` takes the summary (``summary.json`` written). Only the killed
retrains are children: the reference run, the uninterrupted retrain and the continuations
(``attnas.training.retraining.retrain``, what ``attnas retrain`` runs) run in the test's process, on
one thread as the children: a child's start-up costs seconds per call.
"""

from __future__ import annotations

import json
import shutil
import signal

import pytest
import torch
from attnas_subprocess import FIXED_GCN, killed_at_replace, search_here

SEEDS = ["--seeds", "3"]


def retrain_here(run) -> None:
    """``attnas --threads 1 retrain RUN --seeds 3``, in this process."""
    from attnas.training.retraining import retrain

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        retrain(run, seeds=3)
    finally:
        torch.set_num_threads(before)


def timeless(d):
    """``d`` (nested) without its wall-clock entries (``*seconds*``)."""
    if isinstance(d, dict):
        return {k: timeless(v) for k, v in d.items() if "seconds" not in k}
    if isinstance(d, list):
        return [timeless(v) for v in d]
    return d


def temporaries(run) -> list:
    return list(run.rglob(".*.tmp-*"))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished fixed-GCN run (never retrained) and, beside it, a copy retrained uninterrupted."""
    folder = tmp_path_factory.mktemp("retrain-ref")
    search_here(folder, FIXED_GCN, threads=1)
    shutil.copytree(folder / "run", folder / "retrained")
    retrain_here(folder / "retrained")
    return folder / "run", folder / "retrained"


@pytest.mark.parametrize("name, kept", [("seed-1.json", ["seed-0.json"]),
                                        ("summary.json", ["seed-0.json", "seed-1.json", "seed-2.json"]),
                                        ("metrics.json", ["seed-0.json", "seed-1.json", "seed-2.json"])])
def test_a_killed_retrain_continues_to_the_same_summary(finished, tmp_path, name, kept):
    run, ref = finished
    out = tmp_path / "run"
    shutil.copytree(run, out)
    killed = killed_at_replace(name, 1, "retrain", str(out), *SEEDS)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    folder = out / "retrain" / "digits-graph" / "scratch"
    assert sorted(p.name for p in folder.glob("seed-*.json")) == kept
    assert len(temporaries(out)) == 1, temporaries(out)  # the write the kill cut short
    assert (folder / "summary.json").exists() == (name == "metrics.json")
    before = {k: (folder / k).stat().st_mtime_ns for k in kept}
    retrain_here(out)
    assert {k: (folder / k).stat().st_mtime_ns for k in kept} == before  # finished seeds kept, not retrained
    ref_folder = ref / "retrain" / "digits-graph" / "scratch"
    for f in ("seed-0.json", "seed-1.json", "seed-2.json", "summary.json"):
        assert timeless(json.loads((folder / f).read_text())) == timeless(json.loads((ref_folder / f).read_text())), f
    m_out, m_ref = (json.loads((p / "metrics.json").read_text()) for p in (out, ref))
    assert timeless(m_out) == timeless(m_ref) and "retrain_digits-graph_scratch_test_accuracy_mean" in m_out
    assert not temporaries(out)
