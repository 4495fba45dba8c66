"""``latent-bo`` end to end on a tiny AutoAttend search: budget, events, metrics, resume after SIGKILL.

Only the killed run is a child: the reference and the resume (``attnas.pipeline.resume``,
what ``attnas search --resume`` runs) run in the test's process, on one thread as the child.
"""

from __future__ import annotations

import copy
import json
import signal

import pytest

from attnas import pipeline
from attnas.core.errors import ConfigError
from attnas_subprocess import resume_here, run_attnas, search_here


def tiny_latent_bo(tiny_recipe_data: dict) -> dict:
    recipe = copy.deepcopy(tiny_recipe_data)
    recipe["name"] = "tiny-latent-bo"
    recipe["strategy"] = {
        "name": "latent-bo",
        "supernet": {"epochs": 5, "checkpoint_every": 5},
        "vae": {"model": "dvae", "samples": 100, "hidden": 16, "latent": 4, "epochs": 15, "batch_size": 16, "lr": 0.01,
                "checkpoint_every": 2},
        "initial": 10, "budget": 16, "checkpoint_every": 4,
        "bo": {"iterations": 3, "batch_size": 4, "decode_attempts": 10, "num_restarts": 1, "raw_samples": 16,
               "mc_samples": 16, "maxiter": 10, "gp": {"inducing": 8, "epochs": 5}},
        "rerank": {"top_k": 2, "epochs": 1},
    }
    recipe["retrain"] = dict(recipe["retrain"], epochs=2, seeds=1)
    return recipe


def attnas(*args, fault=None, check=True):
    return run_attnas(*args, fault=fault, check=check, threads=1)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_recipe_data):
    return search_here(tmp_path_factory.mktemp("latent-bo"), tiny_latent_bo(tiny_recipe_data), threads=1)


def events(run, phase):
    lines = (run / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["phase"] == phase]


def test_scores_initial_sample_then_bo_rounds_within_budget(reference):
    _, run = reference
    metrics = json.loads((run / "metrics.json").read_text())
    scored = events(run, "latent-bo")
    assert [e["index"] for e in scored] == list(range(len(scored)))
    assert [e["stage"] for e in scored[:10]] == [0] * 10  # the initial prior sample
    stages = [e["stage"] for e in scored[10:]]
    assert stages == sorted(stages) and set(stages) <= {1, 2, 3}
    keys = {json.dumps(e["arch"], sort_keys=True) for e in scored}
    assert len(keys) == len(scored) <= 16  # distinct architectures, at most the budget
    assert metrics["evaluated"] == len(scored) == 10 + metrics["bo_evaluated"]
    # every proposal is scored, a repeat of a scored one or an invalid decoding (budget not exhausted here)
    if len(scored) < 16:
        assert metrics["bo_proposed"] == metrics["bo_evaluated"] + metrics["bo_invalid"] + metrics["bo_repeats"]
        assert metrics["bo_proposed"] == 3 * 4
    assert metrics["bo_evaluated"] > 0  # the VAE decodes some latent points into new architectures
    assert metrics["bo_best_accuracy"] == max(e["accuracy"] for e in scored[10:])
    assert metrics["initial_best_accuracy"] == max(e["accuracy"] for e in scored[:10])
    # the re-ranked top-k are the best scored ones; the run's arch is the best re-ranked one
    reranked = events(run, "rerank")
    assert sorted(e["supernet_score"] for e in reranked) == sorted(e["accuracy"] for e in scored)[-2:]
    arch = json.loads((run / "arch.json").read_text())
    assert arch["choices"] == max(reranked, key=lambda e: e["val"])["arch"]
    assert arch["meta"]["strategy"] == "latent-bo"


# latent-bo:12 dies in the first BO round (the VAE is trained and scored-sample latents saved),
# so the resumed run refits the GPs of that round (their fits must not depend on the process).
@pytest.mark.parametrize("fault", ["latent-bo:12"])
def test_killed_search_resumes_to_the_same_result(reference, tmp_path, fault):
    recipe, ref = reference
    out = tmp_path / "run"
    killed = attnas("search", str(recipe), "--out", str(out), fault=fault, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resume_here(out, threads=1)
    assert json.loads((out / "arch.json").read_text()) == json.loads((ref / "arch.json").read_text())
    strip = [{k: v for k, v in e.items() if k != "time"} for e in events(out, "latent-bo")]
    want = [{k: v for k, v in e.items() if k != "time"} for e in events(ref, "latent-bo")]
    assert strip[-len(want):] == want
    got, exp = (json.loads((r / "metrics.json").read_text()) for r in (out, ref))
    for key in ("evaluated", "bo_best_accuracy", "bo_invalid", "bo_repeats", "test_accuracy"):
        assert got[key] == exp[key], key


def test_options_are_checked(tiny_recipe_data, tmp_path):
    recipe = tiny_latent_bo(tiny_recipe_data)
    recipe["strategy"]["budget"] = 5
    with pytest.raises(ConfigError, match="budget"):
        pipeline.search(recipe, out=tmp_path / "a")
    recipe = tiny_latent_bo(tiny_recipe_data)
    recipe["strategy"]["initial"] = 100
    with pytest.raises(ConfigError, match="initial"):
        pipeline.search(recipe, out=tmp_path / "b")
