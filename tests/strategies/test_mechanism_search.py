"""mechanism-search end to end on tiny ListOps: selection rules, metrics, events, errors, resume."""

from __future__ import annotations

import copy
import json
import signal
import warnings

import pytest
import torch
import yaml
from attnas import pipeline
from attnas.core.errors import ConfigError, UnsupportedError
from attnas_subprocess import run_attnas

CANDIDATES = ["softmax", "linear", "local", "performer"]

TINY = {
    "name": "tiny-listops-mechanisms",
    "seed": 0,
    "task": {"name": "sequence-classification", "dataset": "listops", "batch_size": 32,
             "listops": {"min_length": 5, "max_length": 24, "max_depth": 3, "max_args": 4, "train_size": 96,
                         "val_size": 48, "test_size": 48}},
    "space": {"name": "attention-mechanisms", "candidates": CANDIDATES, "dim": 16, "depth": 1, "heads": 2,
              "ffn_dim": 16, "pool": "mean", "dropout": 0.1,
              "mechanism_options": {"local": {"window": 4}, "performer": {"features": 8, "redraw_every": 3}}},
    "strategy": {"name": "mechanism-search", "mode": "homogeneous",
                 "supernet": {"epochs": 4, "patience": 0, "lr": 0.005, "batch_size": 16, "checkpoint_every": 1},
                 "finetune_steps": 2},
    "retrain": {"epochs": 2, "lr": 0.005, "patience": 0, "batch_size": 16},
}


def recipe(mode="homogeneous", **strategy):
    r = copy.deepcopy(TINY)
    r["strategy"]["mode"] = mode
    r["strategy"].update(strategy)
    return r


@pytest.fixture(autouse=True)
def one_thread():
    """One thread, like the subprocesses of the resume tests (same float results)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def read(run, name):
    return json.loads(run.file(name).read_text()) if hasattr(run, "file") else json.loads((run / name).read_text())


def test_homogeneous_search_picks_the_highest_drop_score(tmp_path):
    run = pipeline.search(recipe(), out=tmp_path / "run")
    arch = read(run, "arch.json")
    metrics = read(run, "metrics.json")
    scores = {m: metrics[f"drop_score_{m}"] for m in CANDIDATES}  # every candidate scored
    best = max(CANDIDATES, key=lambda m: (scores[m], -CANDIDATES.index(m)))
    assert arch["choices"] == {"mechanism": best}
    assert metrics["search_mode"] == "homogeneous" and 0.0 <= metrics["test_accuracy"] <= 1.0
    assert metrics["selection"]["kept"] == [best] and len(metrics["selection"]["trials"]) == 1
    scoring = run.events("scoring")
    assert [e["block"] for e in scoring] == CANDIDATES and [e["index"] for e in scoring] == [0, 1, 2, 3]
    for e in scoring:  # the masked accuracy and the score agree with the base accuracy
        assert e["masked_accuracy"] == pytest.approx(metrics["supernet_val_accuracy"] - e["drop_score"])
    assert [e["epoch"] for e in run.events("supernet")] == [1, 2, 3, 4]
    # the chosen model was trained as an ordinary 1-layer Transformer with that mechanism
    model = pipeline.load_model(run.path)
    assert model.layers[0].attention.mechanism == best and model.layers[0].attention.heads == 2
    # every mechanism's costs beside its score: the parameters of its homogeneous network,
    # latency on the first training batch (16 sequences of the run's length)
    costs = metrics["mechanism_costs"]
    assert list(costs) == CANDIDATES
    assert costs[best]["params"] == sum(p.numel() for p in model.parameters())
    assert all(c["latency_ms"] > 0 for c in costs.values())
    assert metrics["mechanism_costs_input"]["tokens"][0] == 16
    # latency "auto": these networks do not split into parts, so each one is timed whole
    assert metrics["costs_latency"] == "network"
    rows = [json.loads(line) for line in run.file("costs.jsonl").read_text().splitlines()]
    assert len(rows) == len(CANDIDATES) and {r["latency"] for r in rows} == {"network"}
    from attnas.reporting.report import write_report

    report = write_report(run.path).read_text()
    section = report[report.index("## Mechanisms"):]
    for m in CANDIDATES:
        row = next(line for line in section.splitlines() if line.startswith(f"| {m}"))
        assert f"| {scores[m]:.4f} | {costs[m]['params']:g} | {costs[m]['latency_ms']:g} |" in row
    assert f"| {best} **(kept)** |" in section
    assert "; `latency_ms`: the whole network timed (`strategy.costs.latency`: network)." in section


def test_nas_one_shot_keeps_the_top_h_heads_of_one_trial(tmp_path):
    run = pipeline.search(recipe("nas-one-shot"), out=tmp_path / "run")
    metrics = read(run, "metrics.json")
    blocks = [f"{m}/{i}" for m in CANDIDATES for i in range(2)]
    scores = [metrics[f"drop_score_{b}"] for b in blocks]
    top = sorted(range(len(blocks)), key=lambda j: (-scores[j], j))[:2]
    expected = {}
    for j in sorted(top):
        m = blocks[j].split("/")[0]
        expected[m] = expected.get(m, 0) + 1
    assert read(run, "arch.json")["choices"] == {"mechanism": expected}
    assert len(run.events("scoring")) == len(blocks) and not run.events("prune")


def test_nas_prune_drops_the_weakest_head_each_round_until_h_remain(tmp_path):
    run = pipeline.search(recipe("nas-prune"), out=tmp_path / "run")
    metrics = read(run, "metrics.json")
    sel = metrics["selection"]
    rounds = run.events("prune")
    assert [e["round"] for e in rounds] == list(range(1, 4 * 2 - 2 + 1))  # 8 heads pruned to H = 2
    assert [e["heads_left"] for e in rounds] == list(range(7, 1, -1))
    assert [e["dropped"] for e in rounds] == sel["dropped"]
    for trial, dropped in zip(sel["trials"], sel["dropped"]):
        order = list(trial["scores"])
        weakest = min(order, key=lambda n: (trial["scores"][n], -order.index(n)))
        assert dropped == weakest
    assert [len(t["scores"]) for t in sel["trials"]] == list(range(8, 2, -1))  # each round rescored the rest
    kept = read(run, "arch.json")["choices"]["mechanism"]
    assert sum(kept.values()) == 2
    assert sorted(f"{m}" for m, n in kept.items() for _ in range(n)) == sorted(b.split("/")[0] for b in sel["kept"])


@pytest.mark.parametrize("change, error, message", [
    ({"strategy.mode": "nas-prun"}, ConfigError, r"strategy.mode: 'nas-prun' is not a valid choice \(did you mean"),
    ({"strategy.supernet.epochs": 0}, ConfigError, r"epochs: must be >= 1"),
    ({"strategy.finetune_steps": -1}, ConfigError, r"finetune_steps: must be >= 0"),
    ({"strategy.supernet.patiense": 2}, ConfigError, r"strategy.supernet.patiense: unknown key \(did you mean"),
    ({"space.candidates": ["softmax", "lineer"]}, ConfigError, r"unknown attention mechanism 'lineer'"),
    ({"strategy.report_costs": ["params", "latency"]}, ConfigError,
     r"^strategy: report_costs: unknown cost 'latency' \(did you mean 'latency_ms'\?\); valid choices: "),
    ({"strategy.costs.repeats": 0}, ConfigError, r"^strategy.costs.repeats: must be >= 1, got 0"),
])
def test_bad_configs_fail_before_anything_is_written(tmp_path, change, error, message):
    (key, value), = change.items()
    with pytest.raises(error, match=message):
        pipeline.search(recipe(), [f"{key}={json.dumps(value)}"], out=tmp_path / "run")
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_other_spaces_and_single_candidates_are_refused(tmp_path):
    graph = {"name": "graph", "task": {"name": "node-classification", "dataset": "digits-graph"},
             "space": {"name": "autoattend", "layers": 2, "hidden": 16}, "strategy": {"name": "mechanism-search"}}
    with pytest.raises(UnsupportedError, match="needs a space with 'mechanism-supernet' support"):
        pipeline.search(graph, out=tmp_path / "graph")
    evolution = dict(recipe(), strategy={"name": "one-shot-evolution"})
    with pytest.raises(UnsupportedError, match="'one-shot-evolution' needs a space with 'one-shot' support; "
                                               "space 'attention-mechanisms' supports: dag, mechanism-supernet"):
        pipeline.search(evolution, out=tmp_path / "evolution")
    assert not (tmp_path / "evolution" / "config.yaml").exists()
    with pytest.raises(ConfigError, match="1 candidate mechanism"):
        pipeline.search(recipe(), ["space.candidates=[local]"], out=tmp_path / "one")


# ---------------------------------------------------------------------------------------- resume


def killed_search(recipe_file, out, fault):
    proc = run_attnas("search", str(recipe_file), "--out", str(out), fault=fault, check=False, threads=1)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not (out / "metrics.json").exists()


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """``references(mode) -> (recipe_file, run)``: the uninterrupted search of a mode, run once."""
    made = {}

    def reference(mode):
        if mode not in made:
            d = tmp_path_factory.mktemp(f"{mode}-ref")
            f = d / "tiny.yaml"
            f.write_text(yaml.safe_dump(recipe(mode)))
            pipeline.search(f, out=d / "run")  # one thread (the autouse fixture), like the killed process
            made[mode] = f, d / "run"
        return made[mode]

    return reference


def steps(run) -> list[tuple]:
    """The event log as its sequence of steps (no times, losses or scores)."""
    return [tuple(e.get(k) for k in ("phase", "epoch", "round", "index", "block"))
            for e in (json.loads(line) for line in (run / "events.jsonl").read_text().splitlines())]


# supernet:2 and final:1 die before that epoch's checkpoint; prune:3 after a drop, before its
# round's checkpoint; scoring:<n> in the middle of a masked-drop trial (homogeneous: 2 of 4
# blocks scored; NAS One-shot: 5 of 8; NAS Prune: 2 of round 2's 7), so that trial is redone.
@pytest.mark.parametrize("mode, fault", [("nas-prune", "supernet:2"), ("nas-prune", "prune:3"),
                                         ("nas-prune", "scoring:10"), ("homogeneous", "scoring:2"),
                                         ("nas-one-shot", "scoring:5"), ("homogeneous", "final:1")])
def test_killed_mechanism_search_resumes_to_the_same_result(references, tmp_path, mode, fault,
                                                             restore_torch_threads):
    recipe_file, ref = references(mode)
    out = tmp_path / "run"
    killed_search(recipe_file, out, fault)
    torch.set_num_threads(1)  # the killed process's threads (OMP_NUM_THREADS=1): a resume refuses others
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pipeline.resume(out)
    assert not [w for w in caught if "falling back" in str(w.message)]  # every checkpoint loaded cleanly
    assert read(out, "arch.json") == read(ref, "arch.json")
    m_out, m_ref = read(out, "metrics.json"), read(ref, "metrics.json")
    for m in (m_out, m_ref):  # wall times differ from run to run
        m.pop("search_seconds"), m.pop("costs_seconds")
        assert all(c.pop("latency_ms") > 0 for c in m["mechanism_costs"].values())
    assert m_out == m_ref  # every drop score of every trial, the costs, and the final model's accuracies
    # the event log reads as one uninterrupted run: every step once, in the same order
    assert steps(out) == steps(ref)
    assert [s[0] for s in steps(out)].count("search-done") == 1
    assert not [p for folder in (out, out / "checkpoints") for p in folder.glob(".*.tmp-*")]


def test_the_reference_logs_of_a_prune_search(references):
    _, ref = references("nas-prune")
    events = [json.loads(line) for line in (ref / "events.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in events if e["phase"] == "supernet"] == [1, 2, 3, 4]
    assert [e["round"] for e in events if e["phase"] == "prune"] == [1, 2, 3, 4, 5, 6]
    assert [e["index"] for e in events if e["phase"] == "scoring"] == list(range(8 + 7 + 6 + 5 + 4 + 3))


def test_path_keep_search_trains_another_supernet_and_resumes_exactly(references, tmp_path, restore_torch_threads):
    """``supernet.path_keep: 1`` (single-path sampling) trains through one drawn block per step:
    other supernet weights than the paper's every-block training, the same run after a kill."""
    _, ref = references("homogeneous")
    r = recipe()
    r["strategy"]["supernet"]["path_keep"] = 1
    f = tmp_path / "path.yaml"
    f.write_text(yaml.safe_dump(r))
    full = pipeline.search(f, out=tmp_path / "full")
    losses = [e["loss"] for e in full.events("supernet")]
    ref_losses = [json.loads(line)["loss"] for line in (ref / "events.jsonl").read_text().splitlines()
                  if json.loads(line).get("phase") == "supernet"]
    assert len(losses) == len(ref_losses) == 4 and losses != ref_losses
    killed_search(f, tmp_path / "killed", "supernet:2")
    torch.set_num_threads(1)
    pipeline.resume(tmp_path / "killed")
    for name in ("arch.json",):
        assert read(tmp_path / "killed", name) == read(full, name)
    m_out, m_ref = read(tmp_path / "killed", "metrics.json"), read(full, "metrics.json")
    for m in (m_out, m_ref):
        m.pop("search_seconds"), m.pop("costs_seconds")
        for c in m["mechanism_costs"].values():
            c.pop("latency_ms")
    assert m_out == m_ref
