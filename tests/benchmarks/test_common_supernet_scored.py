"""benchmarks/_common.supernet_scored: the architectures a finished one-shot search scored, read from its events."""

from __future__ import annotations

import json

from attnas import pipeline
from benchmarks._common import supernet_scored


def test_reads_every_scored_architecture_once_with_its_score(tiny_recipe_data, tmp_path):
    recipe = dict(tiny_recipe_data, retrain={"epochs": 1, "patience": 0, "init": "supernet", "seeds": 1})
    run = pipeline.search(recipe, out=tmp_path / "run")
    events = [e for e in run.events("evolution") if "arch" in e]
    scored = supernet_scored(tmp_path / "run")
    assert scored and len(scored) == len({s["key"] for s in scored}) <= len(events)
    first = events[0]
    metric = next(k for k in first if k not in {"time", "phase", "stage", "index", "arch"})
    assert scored[0]["arch"] == first["arch"] and scored[0]["score"] == first[metric]
    assert scored[0]["stage"] == first["stage"] == 0
    # the search's own record of what it scored: every population member is among them
    keys = {s["key"] for s in scored}
    population = run.load_checkpoint("evolution")["state"]["population"]
    assert {json.dumps(p["arch"], sort_keys=True) for p in population} <= keys
    assert supernet_scored(tmp_path / "run", phases=("random",)) == []
