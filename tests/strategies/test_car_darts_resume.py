"""A car-darts search killed with SIGKILL in either phase resumes to the same architecture.

``ATTNAS_FAULT=<phase>:<n>`` kills the process right after the n-th epoch event of
``<phase>`` (before that epoch's checkpoint): ``pretext:2`` dies in the context
auto-regression phase (resumes from its epoch-1 checkpoint), ``darts:2`` in the
fine-tuning phase (the finished search phase is only reloaded). The reference and the
resume (``attnas.pipeline.resume``, what ``attnas search --resume`` runs) run in the test's
process, on one thread as the killed child: a child's start-up costs seconds per call.
"""

from __future__ import annotations

import json
import signal

import pytest
from attnas_subprocess import resume_here, run_attnas, search_here

#: One pytest-xdist worker for the module: the uninterrupted reference search is made once.
pytestmark = pytest.mark.xdist_group("car-darts-resume")

RECIPE = {
    "name": "tiny-car-resume",
    "seed": 2,
    "task": {"name": "image-classification", "dataset": "digits", "train_subset": 80, "test_subset": 40,
             "val_fraction": 0.25, "batch_size": 30},
    "space": {"name": "stagewise", "init_channels": 8, "reduction": 1},
    "strategy": {"name": "car-darts", "pretext_epochs": 2, "epochs": 2, "batch_size": 30,
                 "pretext_arch_lr": 0.05, "arch_lr": 0.05},
    "retrain": {"epochs": 1, "optimizer": "sgd", "lr": 0.05, "patience": 0, "batch_size": 40},
}


def attnas(*args, fault=None, check=True):
    return run_attnas(*args, fault=fault, check=check, threads=1)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return search_here(tmp_path_factory.mktemp("car-ref"), RECIPE, threads=1)


def read(run, name):
    return json.loads((run / name).read_text())


def events(run):
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("fault", ["pretext:2", "darts:2"])
def test_killed_car_search_resumes_to_the_same_result(reference, tmp_path, fault):
    recipe, ref = reference
    out = tmp_path / "run"
    killed = attnas("search", str(recipe), "--out", str(out), fault=fault, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (out / "arch.json").exists()
    warned = resume_here(out, threads=1)
    assert not warned, warned  # every checkpoint loaded cleanly
    assert read(out, "arch.json") == read(ref, "arch.json")
    m_out, m_ref = read(out, "metrics.json"), read(ref, "metrics.json")
    for key in ("pretext_loss", "pretext_val_l1", "relaxed_val_accuracy", "val_accuracy", "test_accuracy", "params"):
        assert m_out[key] == m_ref[key], key
    got, want = events(out), events(ref)
    for phase in ("pretext", "darts"):
        mine = [e for e in got if e["phase"] == phase]
        theirs = [e for e in want if e["phase"] == phase]
        assert [e["epoch"] for e in mine] == [1, 2], phase  # no epoch logged twice
        for a, b in zip(mine, theirs):
            assert (a["loss"], a["arch_loss"], a["alpha"], a["arch"]) == \
                   (b["loss"], b["arch_loss"], b["alpha"], b["arch"]), phase
