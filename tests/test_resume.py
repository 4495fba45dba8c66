"""A search killed with SIGKILL resumes and ends exactly as an uninterrupted run.

The process is really killed (``ATTNAS_FAULT=<phase>:<n>`` makes it SIGKILL itself right
after the n-th event of a phase), then continued with ``attnas search --resume``.
"""

from __future__ import annotations

import json
import signal

import pytest
from attnas_subprocess import run_attnas


def attnas(*args, fault=None, check=True):
    return run_attnas(*args, fault=fault, check=check, threads=None)


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, tiny_recipe_data):
    import yaml

    d = tmp_path_factory.mktemp("ref")
    recipe = d / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe_data))
    attnas("search", str(recipe), "--out", str(d / "run"))
    return recipe, d / "run"


@pytest.mark.parametrize("fault", ["supernet:17", "evolution:40", "rerank:2", "final:5"])
def test_killed_search_resumes_to_the_same_result(reference_run, tmp_path, fault):
    recipe, ref = reference_run
    out = tmp_path / "run"
    killed = attnas("search", str(recipe), "--out", str(out), fault=fault, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (out / "metrics.json").exists()
    resumed = attnas("search", "--resume", str(out))
    assert "warning" not in resumed.stderr.lower(), resumed.stderr  # every checkpoint loaded cleanly
    assert json.loads((out / "arch.json").read_text()) == json.loads((ref / "arch.json").read_text())
    m_out, m_ref = (json.loads((p / "metrics.json").read_text()) for p in (out, ref))
    for key in ("val_accuracy", "test_accuracy", "supernet_val_accuracy", "evaluated", "rerank_val"):
        assert m_out[key] == m_ref[key], key
    # the event log reads as one uninterrupted run: no repeated supernet epochs or candidates
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    epochs = [e["epoch"] for e in events if e["phase"] == "supernet"]
    assert epochs == list(range(1, 41))
    assert [e["index"] for e in events if e["phase"] == "evolution"] == list(range(48))
    assert [e["phase"] for e in events].count("search-done") == 1  # also when killed in the final training


def test_resume_of_a_finished_run_is_a_no_op(reference_run):
    _, ref = reference_run
    before = (ref / "metrics.json").read_text()
    attnas("search", "--resume", str(ref))
    assert (ref / "metrics.json").read_text() == before


@pytest.mark.parametrize("fault", ["supernet:15", "supernet:25"])
def test_killed_search_with_a_context_warmup_resumes_to_the_same_result(tmp_path, tiny_recipe_data, fault):
    """Killed before and after the warm-up's end (epoch 20; checkpoints every 10 epochs)."""
    import yaml

    recipe = tmp_path / "warm.yaml"
    data = dict(tiny_recipe_data)
    data["strategy"] = dict(data["strategy"], supernet={"epochs": 40, "checkpoint_every": 10, "context_warmup": 0.5})
    recipe.write_text(yaml.safe_dump(data))
    attnas("search", str(recipe), "--out", str(tmp_path / "ref"))
    out = tmp_path / "run"
    killed = attnas("search", str(recipe), "--out", str(out), fault=fault, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    attnas("search", "--resume", str(out))
    for name in ("arch.json", "metrics.json"):
        a, b = (json.loads((p / name).read_text()) for p in (out, tmp_path / "ref"))
        a.pop("search_seconds", None), b.pop("search_seconds", None)
        assert a == b, name
