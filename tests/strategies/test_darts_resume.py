"""A DARTS search killed with SIGKILL in the middle of its search resumes to the same result.

``ATTNAS_FAULT=darts:<n>`` kills the process right after the n-th epoch event, before that
epoch's checkpoint is written, so the resumed run redoes the epoch from the previous
checkpoint (weights, alpha, both optimisers, schedule, batch order, RNG). The reference and
the resume (``attnas.pipeline.resume``, what ``attnas search --resume`` runs) run in the
test's process, on one thread as the killed child: a child's start-up costs seconds per call.
"""

from __future__ import annotations

import json
import signal

import pytest
from attnas_subprocess import resume_here, run_attnas, search_here

RECIPE = {
    "name": "tiny-darts-resume",
    "seed": 3,
    "task": {"name": "image-classification", "dataset": "digits", "train_subset": 160, "test_subset": 60,
             "val_fraction": 0.25, "batch_size": 40},
    "space": {"name": "hoga", "width": 4, "groups": 2},
    "strategy": {"name": "darts", "epochs": 4, "batch_size": 30, "arch_lr": 0.05, "checkpoint_every": 2},
    "retrain": {"epochs": 2, "optimizer": "sgd", "lr": 0.05, "patience": 0, "batch_size": 40},
}


def attnas(*args, fault=None, check=True):
    return run_attnas(*args, fault=fault, check=check, threads=1)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return search_here(tmp_path_factory.mktemp("darts-ref"), RECIPE, threads=1)


def read(run, name):
    return json.loads((run / name).read_text())


# darts:3 dies after epoch 3's event: resumes from the epoch-2 checkpoint, redoing epoch 3;
# darts:2 dies before the epoch-2 checkpoint: nothing saved yet, so the search restarts.
@pytest.mark.parametrize("fault", ["darts:3", "darts:2"])
def test_killed_darts_search_resumes_to_the_same_result(reference, tmp_path, fault):
    recipe, ref = reference
    out = tmp_path / "run"
    killed = attnas("search", str(recipe), "--out", str(out), fault=fault, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (out / "arch.json").exists()
    warned = resume_here(out, threads=1)
    assert not warned, warned  # every checkpoint loaded cleanly
    assert read(out, "arch.json") == read(ref, "arch.json")
    m_out, m_ref = read(out, "metrics.json"), read(ref, "metrics.json")
    for key in ("relaxed_val_accuracy", "val_accuracy", "test_accuracy", "params"):
        assert m_out[key] == m_ref[key], key
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    ref_events = [json.loads(line) for line in (ref / "events.jsonl").read_text().splitlines()]
    darts = [e for e in events if e["phase"] == "darts"]
    assert [e["epoch"] for e in darts] == [1, 2, 3, 4]  # no epoch logged twice
    # the same losses, alpha and derived cell after every epoch as the uninterrupted run
    for got, want in zip(darts, (e for e in ref_events if e["phase"] == "darts")):
        assert (got["loss"], got["arch_loss"], got["alpha"], got["arch"]) == \
               (want["loss"], want["arch_loss"], want["alpha"], want["arch"])
