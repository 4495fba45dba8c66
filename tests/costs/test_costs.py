"""Measured costs: what each cost counts, the generators left alone, the cache in the run directory."""

from __future__ import annotations

import json
import random

import pytest
import torch

from attnas.costs.config import COSTS, CostsConfig
from attnas.costs.cost_model import COSTS_FILE, CostModel
from attnas.costs.measure import batch_signature, measure


class _SumLoss:
    """A task stand-in whose loss is the sum of the output."""

    def loss(self, out, batch):
        return out.sum()


def test_measure_counts_what_the_docstring_says():
    torch.manual_seed(0)
    model = torch.nn.Linear(1000, 1000, bias=False)
    x = torch.randn(256, 1000)
    before = torch.get_rng_state()
    costs = measure(model, _SumLoss(), x, list(COSTS), warmup=1, repeats=3)
    assert torch.equal(torch.get_rng_state(), before)
    assert set(costs) == set(COSTS)
    assert costs["params"] == 1000 * 1000
    assert costs["macs"] == 256 * 1000 * 1000
    # the backward's peak: the weight, its gradient and the input (the output is freed after the
    # sum, which does not keep it for the backward)
    assert costs["peak_memory_mb"] == pytest.approx((2 * 1000 * 1000 + 256 * 1000) * 4 / 2**20, rel=1e-3)
    assert costs["latency_ms"] > 0 and costs["train_step_ms"] > 0
    assert model.weight.grad is None and model.training  # gradients cleared, mode restored


def test_measure_refuses_an_unknown_cost():
    with pytest.raises(ValueError, match="unknown cost 'flops'"):
        measure(torch.nn.Linear(2, 2), _SumLoss(), torch.zeros(1, 2), ["flops"])


def test_batch_signature_keeps_tensor_shapes_and_leaves_caches_out():
    from attnas.tasks.node_classification import NodeBatch

    batch = NodeBatch(torch.zeros(5, 3), torch.zeros(2, 7, dtype=torch.long), torch.zeros(5, dtype=torch.long),
                      None, key="g", cache={})
    sig = batch_signature(batch)
    assert sig == {"x": [5, 3, "float32"], "edge_index": [2, 7, "int64"], "y": [5, "int64"]}
    batch.cache["adj"] = torch.zeros(5, 5)  # filled while a model runs: the input size stays the same
    assert batch_signature(batch) == sig
    # a sequence task's batch is a mapping: walked at the top, not below
    seq = {"tokens": torch.zeros(4, 60, dtype=torch.long), "y": torch.zeros(4, dtype=torch.long), "extra": {"a": 1}}
    assert batch_signature(seq) == {"tokens": [4, 60, "int64"], "y": [4, "int64"]}


@pytest.fixture(scope="module")
def digits_parts(tiny_recipe_data):
    from attnas.runs.build import build_space, build_task, pick_device
    from attnas.config import load_config
    from attnas.data.root import resolve_data_root

    cfg = load_config(tiny_recipe_data)
    return build_space(cfg), build_task(cfg, resolve_data_root(), pick_device("cpu"))


def test_costs_are_cached_in_the_run_directory_and_reused(tmp_path, digits_parts):
    from attnas.runs.run_dir import RunDir

    space, task = digits_parts
    run = RunDir.create(tmp_path / "run", "name: x\n", {})
    options = CostsConfig(warmup=0, repeats=1, latency="network")
    archs = [space.sample(random.Random(i)) for i in range(3)]
    first = CostModel(space, task, run, options, default_batch_size=64)
    measured = [first.costs(a, ["params", "latency_ms"]) for a in archs]
    assert first.measured == 3
    assert [first.costs(a, ["params", "latency_ms"]) for a in archs] == measured and first.measured == 3
    for arch, costs in zip(archs, measured):  # params are those of the standalone network
        assert costs["params"] == sum(p.numel() for p in space.build(arch, task).parameters())
    first.close()
    rows = [json.loads(line) for line in run.file(COSTS_FILE).read_text().splitlines()]
    assert len(rows) == 3 and rows[0]["input"]["x"] == [1797, 64, "float32"]

    # a resumed search reads the file: the same values, nothing measured again
    second = CostModel(space, task, run, options, default_batch_size=64)
    assert [second.costs(a, ["params", "latency_ms"]) for a in archs] == measured
    assert second.measured == 0 and second.seconds == 0.0
    # a cost not measured yet is measured and appended; another protocol is another key
    second.costs(archs[0], ["macs"])
    assert second.measured == 1
    third = CostModel(space, task, run, CostsConfig(warmup=0, repeats=2, latency="network"), default_batch_size=64)
    assert third.key(archs[0]) != second.key(archs[0])
    third.costs(archs[0], ["params"])
    assert third.measured == 1
    run.close()


def test_relative_costs_measure_the_reference_beside_each_architecture_once(tmp_path, digits_parts):
    from attnas.runs.run_dir import RunDir

    space, task = digits_parts
    run = RunDir.create(tmp_path / "run", "name: x\n", {})
    options = CostsConfig(warmup=0, repeats=1, latency="network")
    archs = [space.sample(random.Random(i)) for i in range(3)]
    first = CostModel(space, task, run, options, default_batch_size=64)
    fractions = [first.relative(a, archs[0], ["params", "latency_ms"]) for a in archs]
    params = {a.key(): first.costs(a, ["params"])["params"] for a in archs}
    for arch, f in zip(archs, fractions):
        assert f["params"] == params[arch.key()] / params[archs[0].key()] and f["latency_ms"] > 0
    assert [first.relative(a, archs[0], ["params", "latency_ms"]) for a in archs] == fractions  # cached
    first.close()
    rows = [json.loads(line) for line in run.file(COSTS_FILE).read_text().splitlines()]
    beside = [r for r in rows if r.get("reference") == archs[0].choices]
    assert len(beside) == 3 and all(set(r["costs"]) == {"reference:params", "reference:latency_ms"} for r in beside)
    second = CostModel(space, task, run, options, default_batch_size=64)  # a resumed search: nothing timed again
    assert [second.relative(a, archs[0], ["params", "latency_ms"]) for a in archs] == fractions
    assert second.seconds == 0.0
    run.close()


def test_costs_config_is_checked():
    from attnas.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"costs.repeats: must be >= 1, got 0"):
        CostsConfig(repeats=0)
    with pytest.raises(ConfigError, match=r"costs.rtol: must be >= 0, got -0.1"):
        CostsConfig(rtol=-0.1)


def test_timing_stops_once_the_median_is_stable():
    from attnas.costs.measure import stable_median

    assert not stable_median([10.0], 1, 0.1)  # one run cannot judge
    assert stable_median([10.0, 10.5], 2, 0.1) and not stable_median([10.0, 10.5], 3, 0.1)
    assert not stable_median([10.0, 20.0], 2, 0.1)  # the second run moved the median by 25 %
    assert not stable_median([10.0, 20.0, 10.5], 2, 0.1)  # 15.0 -> 10.5
    assert stable_median([10.0, 20.0, 10.5, 10.2], 2, 0.1)  # 10.5 -> 10.35


def test_a_steady_run_is_timed_min_repeats_times_and_a_noisy_one_repeats_times(monkeypatch):
    import attnas.costs.measure as costs

    clock = [0.0]
    monkeypatch.setattr(costs.time, "perf_counter", lambda: clock[0])

    def runner(durations_ms):
        calls = []

        def run():
            clock[0] += durations_ms[len(calls) % len(durations_ms)] / 1000.0
            calls.append(1)
        return run, calls

    run, calls = runner([5.0])
    assert costs.median_ms(run, 1, 5, torch.device("cpu"), 2, 0.1) == pytest.approx(5.0)
    assert len(calls) == 1 + 2
    run, calls = runner([5.0, 50.0])  # alternating: the median keeps moving
    costs.median_ms(run, 1, 5, torch.device("cpu"), 2, 0.1)
    assert len(calls) == 1 + 5
    run, calls = runner([5.0])  # rtol 0: always every repeat
    costs.median_ms(run, 1, 5, torch.device("cpu"), 2, 0.0)
    assert len(calls) == 1 + 5


def test_latency_by_operations_times_each_part_once_and_reuses_it(tmp_path, digits_parts):
    from attnas.runs.run_dir import RunDir

    space, task = digits_parts
    run = RunDir.create(tmp_path / "run", "name: x\n", {})
    options = CostsConfig(warmup=0, repeats=1, latency="operations")
    archs = [space.sample(random.Random(i)) for i in range(4)]
    first = CostModel(space, task, run, options, default_batch_size=64)
    lat = first.costs(archs[0], ["latency_ms"])["latency_ms"]
    timed = first.parts_measured
    model = space.build(archs[0], task)
    with torch.no_grad():
        parts = model.latency_parts(first.batch())
    assert timed == len({json.dumps(sig) for sig, _ in parts}) >= 3  # stem, operations, merges, head
    rows = [json.loads(line) for line in run.file(COSTS_FILE).read_text().splitlines()]
    part_ms = {json.dumps(r["part"]): r["latency_ms"] for r in rows if "part" in r}
    assert len(part_ms) == timed  # the latency: every part's time, a repeated part counted each time
    assert lat == pytest.approx(sum(part_ms[json.dumps(sig)] for sig, _ in parts), abs=1e-3)
    for arch in archs[1:]:  # the stem and the head are shared: never timed twice
        first.costs(arch, ["latency_ms"])
    assert first.parts_measured < timed * 4
    assert sum(1 for r in map(json.loads, run.file(COSTS_FILE).read_text().splitlines())
               if r.get("part") == ["stem"]) == 1
    first.close()
    # a resumed search re-uses every part (and every architecture's latency)
    second = CostModel(space, task, run, options, default_batch_size=64)
    assert second.costs(archs[0], ["latency_ms"])["latency_ms"] == lat
    fresh = space.sample(random.Random(99))
    second.costs(fresh, ["latency_ms"])
    assert second.measured == 1 and second.parts_measured <= len(space.build(fresh, task).latency_parts(second.batch()))
    second.close()
    # network timing and operation timing are different protocols: different cache keys
    assert CostModel(space, task, None, CostsConfig(warmup=0, repeats=1, latency="network"), 64).key(archs[0]) \
        != first.key(archs[0])
    run.close()


def test_latency_by_operations_needs_networks_that_split(digits_parts):
    from attnas.core.errors import ConfigError

    space, task = digits_parts

    class _Whole:
        name = "whole"
        options = None

        def build(self, arch, task):
            return torch.nn.Identity()

    model = CostModel(_Whole(), task, None, CostsConfig(latency="operations"), default_batch_size=64)
    with pytest.raises(ConfigError, match=r"^strategy.costs.latency: 'operations' needs networks that split into "
                                          r"operations; those of space 'whole' do not \(use 'network'\)$"):
        model.costs(space.sample(random.Random(0)), ["latency_ms"])


class _Counting:
    """A space that delegates to ``inner`` and counts the networks it builds; with
    ``whole=True`` its networks do not split into parts (no ``latency_parts``)."""

    def __init__(self, inner, whole: bool = False):
        self.inner, self.whole, self.builds = inner, whole, 0
        self.name, self.options = inner.name, inner.options

    def sample(self, rng):
        return self.inner.sample(rng)

    def build(self, arch, task):
        self.builds += 1
        model = self.inner.build(arch, task)
        return _Plain(model) if self.whole else model


class _Plain(torch.nn.Module):
    """A network timed whole only: it runs ``inner`` but has no ``latency_parts``."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, batch):
        return self.inner(batch)


def _rows(run):
    return [json.loads(line) for line in run.file(COSTS_FILE).read_text().splitlines()]


def test_auto_latency_times_an_autoattend_network_by_its_operations(tmp_path, digits_parts):
    from attnas.runs.run_dir import RunDir

    inner, task = digits_parts
    space = _Counting(inner)
    run = RunDir.create(tmp_path / "run", "name: x\n", {})
    assert CostsConfig().latency == "auto"  # the default
    auto = CostModel(space, task, run, CostsConfig(warmup=0, repeats=1), default_batch_size=64)
    arch = inner.sample(random.Random(3))
    lat = auto.costs(arch, ["params", "latency_ms"])["latency_ms"]
    assert auto.latency == "operations" and auto.parts_measured >= 3 and lat > 0
    assert space.builds == 1  # the network built to resolve "auto" is the one measured
    # the resolved method is in the cache key (the same as an explicit "operations"), in the
    # protocol, and in the row
    ops = CostModel(inner, task, None, CostsConfig(warmup=0, repeats=1, latency="operations"), 64)
    net = CostModel(inner, task, None, CostsConfig(warmup=0, repeats=1, latency="network"), 64)
    assert auto.key(arch) == ops.key(arch) != net.key(arch)
    assert auto.context()["protocol"]["latency"] == "operations"
    assert CostsConfig().protocol()["latency"] == "auto"
    assert [r["latency"] for r in _rows(run) if "costs" in r] == ["operations"]
    # the sum of the parts' times, each timed once
    part_ms = {json.dumps(r["part"]): r["latency_ms"] for r in _rows(run) if "part" in r}
    with torch.no_grad():
        sigs = [json.dumps(sig) for sig, _ in inner.build(arch, task).latency_parts(auto.batch())]
    assert lat == pytest.approx(sum(part_ms[sig] for sig in sigs), abs=1e-3)
    auto.close()
    run.close()


def test_auto_latency_times_a_network_without_parts_whole(digits_parts):
    inner, task = digits_parts
    space = _Counting(inner, whole=True)
    auto = CostModel(space, task, None, CostsConfig(warmup=0, repeats=1), default_batch_size=64)
    arch = inner.sample(random.Random(3))
    assert auto.costs(arch, ["latency_ms"])["latency_ms"] > 0
    assert auto.latency == "network" and auto.parts_measured == 0 and space.builds == 1
    net = CostModel(space, task, None, CostsConfig(warmup=0, repeats=1, latency="network"), 64)
    assert auto.key(arch) == net.key(arch)  # what an explicit "network" measures and caches
    # without an architecture at hand (the protocol asked first), one drawn with Random(0) is built
    fresh = CostModel(space, task, None, CostsConfig(warmup=0, repeats=1), default_batch_size=64)
    assert fresh.context()["protocol"]["latency"] == "network" and space.builds == 2


def test_a_cached_network_latency_is_not_reused_as_an_operations_one(tmp_path, digits_parts):
    from attnas.runs.run_dir import RunDir

    space, task = digits_parts
    arch = space.sample(random.Random(5))
    run = RunDir.create(tmp_path / "run", "name: x\n", {})
    net = CostModel(space, task, run, CostsConfig(warmup=0, repeats=1, latency="network"), 64)
    whole = net.costs(arch, ["latency_ms"])["latency_ms"]
    net.close()
    rows = _rows(run)
    assert [r["latency"] for r in rows] == ["network"]
    # rows without the method (as written before "auto"): "auto" resolves to operations, a
    # different key, so the whole network's figure is not taken for the sum of the parts
    for r in rows:
        del r["latency"]
    for options in (CostsConfig(warmup=0, repeats=1), CostsConfig(warmup=0, repeats=1, latency="operations")):
        run.file(COSTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
        again = CostModel(space, task, run, options, 64)
        again.costs(arch, ["latency_ms"])
        assert again.latency == "operations" and again.measured == 1 and again.parts_measured >= 3
        again.close()
    # a run whose rows record "network" (a search resumed with "auto") keeps it: the same figure
    run.file(COSTS_FILE).write_text(json.dumps({**rows[0], "latency": "network"}) + "\n")
    resumed = CostModel(space, task, run, CostsConfig(warmup=0, repeats=1), 64)
    assert resumed.costs(arch, ["latency_ms"])["latency_ms"] == whole
    assert resumed.latency == "network" and resumed.measured == 0
    run.close()


def test_costs_task_measures_the_same_architecture_on_longer_inputs():
    from attnas.core.errors import ConfigError
    from attnas.spaces.attention_mechanisms import AttentionMechanismsConfig, AttentionMechanismSpace
    from attnas.tasks.associative_recall import MQARTask, MQARTaskConfig

    task = MQARTask(MQARTaskConfig(vocab_size=16, seq_len=16, num_pairs=2, train_size=8, val_size=4, test_size=4))
    space = AttentionMechanismSpace(AttentionMechanismsConfig(candidates=("softmax", "linear"), dim=8, depth=1,
                                                              heads=2, ffn_dim=8, dropout=0.0))
    arch = space.arch({"mechanism": "softmax"})
    longer = CostsConfig(batch_size=2, repeats=2, task={"seq_len": 64, "train_size": 2})
    model = CostModel(space, task, None, longer)
    assert model.batch()["tokens"].shape == (2, 64) and model.task.options.vocab_size == 16
    assert task.options.seq_len == 16  # the run's own task is left as it was
    own = CostModel(space, task, None, CostsConfig(batch_size=2, repeats=2))
    assert own.batch()["tokens"].shape == (2, 16) and own.key(arch) != model.key(arch)
    assert model.costs(arch, ["macs"])["macs"] > own.costs(arch, ["macs"])["macs"]
    with pytest.raises(ConfigError, match=r"strategy.costs.task.seq_lenn: unknown option of task 'mqar' \(did you"):
        CostModel(space, task, None, CostsConfig(task={"seq_lenn": 64}))
    with pytest.raises(ConfigError, match=r"seq_len"):
        CostModel(space, task, None, CostsConfig(task={"seq_len": 0}))
