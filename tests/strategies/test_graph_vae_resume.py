"""A ``graph-vae`` run killed with SIGKILL after its VAE training resumes to the same result.

``ATTNAS_FAULT=<phase>:<n>`` kills the process right after the n-th event of a phase,
before that step's checkpoint: in the evaluation (Table 2's first sparse GP done, not
saved) and in the latent BO (two proposals of the second round logged, the round not
saved). The resumed run redoes that step from the previous checkpoint and must end with
the uninterrupted run's metrics, ``bo.json``, architecture and event log. A kill during
the VAE training: ``test_graph_vae_strategy.py``. Only the killed runs are children: the
reference and the resumes (``attnas.pipeline.resume``, what ``attnas search --resume``
runs) run in the test's process, on one thread as the children.
"""

from __future__ import annotations

import json
import signal

import pytest
from attnas_subprocess import resume_here, run_attnas, search_here
from enas_table import RECIPE, write_enas


def timeless(d: dict) -> dict:
    """``d`` without its wall-clock entries (``*seconds*``)."""
    return {k: v for k, v in d.items() if "seconds" not in k}


def read(run, name):
    return json.loads((run / name).read_text())


def steps(run) -> list[tuple]:
    """The event log as its sequence of steps (no times, losses or scores)."""
    return [tuple(e.get(k) for k in ("phase", "stage", "epoch", "index", "round"))
            for e in (json.loads(line) for line in (run / "events.jsonl").read_text().splitlines())]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("graph-vae-ref")
    write_enas(folder / "data", 60)
    recipe, run = search_here(folder, RECIPE, threads=1, data_dir=folder / "data")
    return recipe, folder / "data", run


@pytest.mark.parametrize("fault, redone", [("evaluation:2", ("evaluation", "table2", None, None, None)),
                                           ("bo:6", ("bo", 2, None, 4, None))])
def test_killed_graph_vae_run_resumes_to_the_same_result(reference, tmp_path, fault, redone):
    recipe, data, ref = reference
    out = tmp_path / "run"
    killed = run_attnas("search", str(recipe), "--out", str(out), "--data-dir", str(data), fault=fault, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (out / "metrics.json").exists() and redone in steps(out)
    warned = resume_here(out, threads=1, data_dir=data)
    assert not warned, warned  # every checkpoint loaded cleanly
    assert read(out, "arch.json") == read(ref, "arch.json")
    assert timeless(read(out, "metrics.json")) == timeless(read(ref, "metrics.json"))
    assert read(out, "bo.json") == read(ref, "bo.json")
    assert steps(out) == steps(ref)  # the redone step logged once, one search-done
    assert [s[0] for s in steps(out)].count("search-done") == 1
    assert not [p for folder in (out, out / "checkpoints") for p in folder.glob(".*.tmp-*")]
