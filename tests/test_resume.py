"""A search killed with SIGKILL resumes and ends exactly as an uninterrupted run.

The process is really killed (``ATTNAS_FAULT=<phase>:<n>`` makes it SIGKILL itself right
after the n-th event of a phase), then continued with ``attnas.pipeline.resume`` (what
``attnas search --resume`` runs) in the test's own process, as the uninterrupted
reference is: a child's start-up costs seconds per call.
"""

from __future__ import annotations

import copy
import json
import signal

import pytest
import torch
from attnas_subprocess import resume_here, run_attnas, search_here


def attnas(*args, fault=None, check=True):
    # the reference and resumes run in this process on its threads: the child uses the same
    return run_attnas(*args, fault=fault, check=check, threads=torch.get_num_threads())


def small(tiny_recipe_data: dict) -> dict:
    """The tiny digits recipe at half its sizes: supernet 20 epochs (checkpoints every 5),
    a population of 12 and 3 rounds of 4 children (checkpoints every 5 scores), 3 re-ranked
    for 1 epoch, 8 final epochs."""
    r = copy.deepcopy(tiny_recipe_data)
    r["strategy"] = dict(r["strategy"], supernet={"epochs": 20, "checkpoint_every": 5},
                         evolution={"population": 12, "parents": 3, "children": 4, "rounds": 3, "checkpoint_every": 5},
                         rerank={"top_k": 3, "epochs": 1})
    r["retrain"] = dict(r["retrain"], epochs=8)
    return r


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, tiny_recipe_data):
    return search_here(tmp_path_factory.mktemp("ref"), small(tiny_recipe_data), torch.get_num_threads())


# supernet:7 dies between the epoch-5 and epoch-10 checkpoints; evolution:18 in the second
# round, before any of its scores is checkpointed (it resumes from its drawn candidates);
# rerank:2 after the second re-ranked candidate; final:5 in the final training
@pytest.mark.parametrize("fault", ["supernet:7", "evolution:18", "rerank:2", "final:5"])
def test_killed_search_resumes_to_the_same_result(reference_run, tmp_path, fault):
    recipe, ref = reference_run
    out = tmp_path / "run"
    killed = attnas("search", str(recipe), "--out", str(out), fault=fault, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (out / "metrics.json").exists()
    warned = resume_here(out, torch.get_num_threads())
    assert not warned, warned  # every checkpoint loaded cleanly
    assert json.loads((out / "arch.json").read_text()) == json.loads((ref / "arch.json").read_text())
    m_out, m_ref = (json.loads((p / "metrics.json").read_text()) for p in (out, ref))
    for key in ("val_accuracy", "test_accuracy", "supernet_val_accuracy", "evaluated", "rerank_val"):
        assert m_out[key] == m_ref[key], key
    # the event log reads as one uninterrupted run: no repeated supernet epochs or candidates
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    epochs = [e["epoch"] for e in events if e["phase"] == "supernet"]
    assert epochs == list(range(1, 21))
    assert [e["index"] for e in events if e["phase"] == "evolution"] == list(range(24))
    assert [e["phase"] for e in events].count("search-done") == 1  # also when killed in the final training


def test_resume_of_a_finished_run_is_a_no_op(reference_run):
    _, ref = reference_run
    before = (ref / "metrics.json").read_text()
    attnas("search", "--resume", str(ref))  # the command line's --resume, in a child
    assert (ref / "metrics.json").read_text() == before


@pytest.fixture(scope="module")
def warmup_reference(tmp_path_factory, tiny_recipe_data):
    data = small(tiny_recipe_data)
    data["strategy"]["supernet"] = {"epochs": 20, "checkpoint_every": 5, "context_warmup": 0.5}
    return search_here(tmp_path_factory.mktemp("warm"), data, torch.get_num_threads())


@pytest.mark.parametrize("fault", ["supernet:7", "supernet:13"])
def test_killed_search_with_a_context_warmup_resumes_to_the_same_result(warmup_reference, tmp_path, fault):
    """Killed before and after the warm-up's end (epoch 10; checkpoints every 5 epochs)."""
    kill_resume_and_compare(*warmup_reference, tmp_path / "run", fault)


def kill_resume_and_compare(recipe, ref, out, fault):
    """Run ``recipe`` into ``out`` killed at ``fault``, resume it, and check that it found and
    scored what the uninterrupted ``ref`` did."""
    killed = attnas("search", str(recipe), "--out", str(out), fault=fault, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resume_here(out, torch.get_num_threads())
    for name in ("arch.json", "metrics.json"):
        a, b = (json.loads((p / name).read_text()) for p in (out, ref))
        a.pop("search_seconds", None), b.pop("search_seconds", None)
        assert a == b, name


@pytest.fixture(scope="module")
def averaging_reference(tmp_path_factory, tiny_recipe_data):
    data = small(tiny_recipe_data)
    data["strategy"]["supernet"] = {"epochs": 20, "checkpoint_every": 5, "context_warmup": 0.25, "average": 0.5}
    return search_here(tmp_path_factory.mktemp("avg"), data, torch.get_num_threads())


def test_killed_search_with_weight_averaging_resumes_to_the_same_result(averaging_reference, tmp_path):
    """Killed at epoch 17: the running mean of epochs 11-15 comes back from the epoch-15 checkpoint."""
    kill_resume_and_compare(*averaging_reference, tmp_path / "run", "supernet:17")
