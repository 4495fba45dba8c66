"""``latent-bo`` under ``strategy.constraints``: nothing over a limit is scored or chosen,
rejections are logged and counted, two objectives are refused, and a killed constrained
search resumes to the same architecture re-using its measured costs.

The reference runs in the test's process and the killed run is a child, both on one thread
(as in ``test_latent_bo.py``, whose tiny recipe this is).
"""

from __future__ import annotations

import json
import signal

import pytest

from attnas import pipeline
from attnas.core.errors import ConfigError
from attnas.runs.run_dir import RunDir
from attnas_subprocess import resume_here, run_attnas, search_here
from test_latent_bo import tiny_latent_bo

LIMIT = 2400  # about half of the tiny space's architectures are over it, and some BO proposals


def constrained(tiny_recipe_data: dict) -> dict:
    """The tiny latent-bo recipe with a params limit and a loose latency one (measured, cached)."""
    recipe = tiny_latent_bo(tiny_recipe_data)
    recipe["strategy"].update(constraints={"params": LIMIT, "latency_ms": 1e6},
                              costs={"warmup": 0, "repeats": 1})
    return recipe


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_recipe_data):
    return search_here(tmp_path_factory.mktemp("latent-bo-constrained"), constrained(tiny_recipe_data), threads=1)


def events(run, phase):
    return [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["phase"] == phase]


def key(choices) -> str:
    return json.dumps(choices, sort_keys=True)


def test_nothing_over_the_limit_is_scored_or_chosen(reference):
    _, run = reference
    scored, rejected = events(run, "latent-bo"), events(run, "rejected")
    metrics = json.loads((run / "metrics.json").read_text())
    assert [e["stage"] for e in scored[:10]] == [0] * 10  # the initial sample: 10 feasible ones
    assert all(e["costs"]["params"] <= LIMIT and e["costs"]["latency_ms"] > 0 for e in scored)
    assert all(e["costs"]["params"] > LIMIT and e["over"] == ["params"] for e in rejected)
    assert not {key(e["arch"]) for e in rejected} & {key(e["arch"]) for e in scored}
    # rejections: logged once per architecture, counted apart from invalid decodings and repeats
    assert len({key(e["arch"]) for e in rejected}) == len(rejected) == metrics["rejected"]
    assert metrics["bo_rejected"] > 0
    if len(scored) < 16:  # budget not exhausted: every proposal is accounted for
        assert metrics["bo_proposed"] == (metrics["bo_evaluated"] + metrics["bo_invalid"] + metrics["bo_repeats"]
                                          + metrics["bo_rejected"]) == 3 * 4
    # a rejected proposal enters the GP (with the worst observed score), as an invalid one does
    state = RunDir.open(run).load_checkpoint("latent-bo")["state"]
    assert len(state["y"]) == 10 + metrics["bo_evaluated"] + metrics["bo_invalid"] + metrics["bo_repeats"] \
        + metrics["bo_rejected"]
    # the chosen architecture is a scored one, within the limit
    arch = json.loads((run / "arch.json").read_text())
    assert key(arch["choices"]) in {key(e["arch"]) for e in scored}
    assert metrics["params"] <= LIMIT


def test_two_objectives_are_a_one_line_error_with_nothing_written(tmp_path, tiny_recipe_data):
    recipe = tiny_latent_bo(tiny_recipe_data)
    recipe["strategy"]["objectives"] = ["val_accuracy", "params"]
    with pytest.raises(ConfigError, match="one-shot-evolution") as info:
        pipeline.search(recipe, out=tmp_path / "run")
    assert "\n" not in str(info.value) and str(info.value).startswith("strategy.objectives: latent-bo")
    assert not (tmp_path / "run").exists()


def test_too_few_feasible_architectures_is_evolutions_error(tmp_path, tiny_recipe_data):
    recipe = tiny_latent_bo(tiny_recipe_data)
    recipe["strategy"]["constraints"] = {"params": 10}
    with pytest.raises(ConfigError, match=r"strategy.constraints: only 0 of the 100 distinct architectures drawn "
                                          r"meet params <= 10, 10 were needed"):
        pipeline.search(recipe, out=tmp_path / "run")


# rejected:16 dies in the first BO round after two of its rejections (14 come from drawing the
# initial sample): the round is redone, its rejections logged again, once. latent-bo:11 dies
# in the second round: the first round's rejections come back from the checkpoint.
@pytest.mark.parametrize("fault", ["rejected:16", "latent-bo:11"])
def test_killed_constrained_search_resumes_to_the_same_result_reusing_costs(reference, tmp_path, fault):
    recipe, ref = reference
    out = tmp_path / "run"
    killed = run_attnas("search", str(recipe), "--out", str(out), fault=fault, check=False, threads=1)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert len(events(out, "latent-bo")) >= 10  # killed in the BO, after the initial sample was scored
    before = (out / "costs.jsonl").read_text().splitlines()
    resume_here(out, threads=1)
    after = (out / "costs.jsonl").read_text().splitlines()
    assert after[: len(before)] == before  # what was measured before the kill is kept ...
    keys = [json.loads(line)["key"] for line in after]
    assert len(keys) == len(set(keys))  # ... and re-used: no architecture measured twice
    assert json.loads((out / "arch.json").read_text()) == json.loads((ref / "arch.json").read_text())
    strip = [{k: v for k, v in e.items() if k != "time"} for e in events(out, "latent-bo")]
    want = [{k: v for k, v in e.items() if k != "time"} for e in events(ref, "latent-bo")]
    assert [(e["arch"], e["stage"], e["accuracy"], e["costs"]["params"]) for e in strip] == \
        [(e["arch"], e["stage"], e["accuracy"], e["costs"]["params"]) for e in want]
    assert sorted(key(e["arch"]) for e in events(out, "rejected")) == \
        sorted(key(e["arch"]) for e in events(ref, "rejected"))  # each rejection logged once
    got, exp = (json.loads((r / "metrics.json").read_text()) for r in (out, ref))
    for name in ("evaluated", "bo_rejected", "bo_invalid", "rejected", "params", "test_accuracy"):
        assert got[name] == exp[name], name


def test_the_random_counterpart_of_a_constrained_latent_bo_runs_the_same_constraints():
    """``attnas compare``'s random row of a constrained latent-bo: one-shot-random under the same
    constraints and costs (latent-bo's options have no ``relative_to``: the limits are absolute)."""
    from attnas.strategies.latent_bo import LatentBO, LatentBOConfig
    from attnas.config.values import from_mapping
    from attnas.strategies.one_shot_config import OneShotRandomConfig

    options = from_mapping(LatentBOConfig, {"constraints": {"params": LIMIT}, "costs": {"warmup": 0, "repeats": 1}})
    section = LatentBO.random_counterpart(options, None, 0)
    assert section["name"] == "one-shot-random" and section["samples"] == options.budget
    assert section["constraints"] == {"params": LIMIT} and section["relative_to"] is None
    assert section["costs"]["repeats"] == 1
    random_options = from_mapping(OneShotRandomConfig, {k: v for k, v in section.items() if k != "name"})
    assert random_options.constraints == {"params": LIMIT}
