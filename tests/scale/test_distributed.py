"""Data-parallel training with torch.distributed (gloo, 2 CPU processes via torch.multiprocessing).

Equivalence tested: W ranks, each on its part of a step's data, with averaged gradients,
end with the weights of one process training on the union of the parts (SGD, so the
comparison is not blurred by Adam's division by tiny second moments); the difference is
floating-point summation order only.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnas.core.errors import ConfigError, TrainingError
from attnas.scale import distributed
from attnas.training.train import train_epoch

#: One pytest-xdist worker for the module: its two-rank spawn (seconds) is made once, not once per worker.
pytestmark = pytest.mark.xdist_group("distributed")

CFG = SimpleNamespace(batch_size=5, grad_clip=1.0)


class ListTask:
    """A task whose training split is a fixed list of (x, y) batches."""

    def __init__(self, batches):
        self._batches = batches

    def batches(self, split, shuffle=False, generator=None, batch_size=None):
        yield from self._batches

    def loss(self, output, batch):
        return F.mse_loss(output, batch[1])


def toy_data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(40, 4, generator=g), torch.randn(40, 3, generator=g)


def toy_train(task, dist=None, epochs=3, phase="training"):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    losses = [train_epoch(lambda b: model(b[0]), task, opt, params, CFG, torch.Generator(), dist=dist, phase=phase,
                          epoch=e) for e in range(1, epochs + 1)]
    return model.state_dict(), losses


def _toy_ranks(out, recipe):
    """Every data-parallel run of this file in one pair of spawned processes (a spawn costs seconds)."""
    from pathlib import Path

    from attnas.runs.run_dir import RunDir

    ctx, _ = distributed.setup(torch.device("cpu"))
    x, y = toy_data()
    batches = [(x[i : i + 5], y[i : i + 5]) for i in range(0, 40, 5)]  # 8 batches: 4 steps of 2
    state, losses = toy_train(ListTask(batches), dist=ctx)
    if ctx.is_main:
        torch.save({"state": state, "losses": losses}, Path(out) / "toy.pt")
    # rank 1's part of the second step is NaN: every rank stops there with the same one line
    # (test_a_nan_loss_on_one_rank_stops_every_rank_with_one_line)
    poisoned = [(bx, by * float("nan")) if i == 3 else (bx, by) for i, (bx, by) in enumerate(batches)]
    try:
        toy_train(ListTask(poisoned), dist=ctx, phase="supernet")
    except TrainingError as exc:
        (Path(out) / f"nan-rank-{ctx.rank}.txt").write_text(str(exc))
    # first-order DARTS (test_two_process_darts_equals_one_process_on_the_union_batches)
    run = RunDir.create(Path(out) / "darts", "name: toy\n", {}) if ctx.is_main else None
    ctx.barrier()
    result = toy_darts(run or distributed.FollowerRun(Path(out) / "darts"), per_batch=5)
    assert (result is None) == (not ctx.is_main)  # rank 0 alone derives the architecture
    # a real search (test_two_process_supernet_training_equals_one_process): it finds this
    # process group and ends it when it finishes
    from attnas import pipeline

    pipeline.search(recipe, out=Path(out) / "ddp")
    assert distributed.current() is None
    # everything is written and closed: end the rank without the interpreter's teardown of
    # torch and the search's modules (seconds on a loaded machine, and no part of the checks)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.fixture(scope="module")
def ddp_recipe(tiny_recipe_data):
    r = copy.deepcopy(tiny_recipe_data)
    r["strategy"] = {"name": "one-shot-evolution",
                     "supernet": {"epochs": 4, "checkpoint_every": 2, "optimizer": "sgd", "lr": 0.05},
                     "evolution": {"population": 4, "parents": 2, "children": 2, "rounds": 1},
                     "rerank": {"top_k": 1, "epochs": 0}}
    r["retrain"] = {"epochs": 1, "patience": 0, "init": "supernet"}
    return r


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory, ddp_recipe):
    """The output folder of :func:`_toy_ranks` run on 2 gloo processes."""
    out = tmp_path_factory.mktemp("two-ranks")
    distributed.spawn(_toy_ranks, 2, str(out), ddp_recipe)
    return out


def test_two_ranks_equal_one_process_on_the_union_batch(two_ranks):
    got = torch.load(two_ranks / "toy.pt", weights_only=True)
    x, y = toy_data()
    union = [(x[i : i + 10], y[i : i + 10]) for i in range(0, 40, 10)]  # each step's two batches together
    state, losses = toy_train(ListTask(union))
    for k in state:
        torch.testing.assert_close(got["state"][k], state[k], rtol=1e-5, atol=1e-6)
    assert got["losses"] == pytest.approx(losses, rel=1e-6)


NAN_AT_STEP_2 = ("supernet: the training loss became nan at epoch 1, step 2; "
                 "lower the learning rate or clip gradients (grad_clip)")


def test_a_nan_loss_on_one_rank_stops_every_rank_with_one_line(two_ranks):
    """The all-reduced loss is checked by errors.check_finite_loss on every rank: one
    TrainingError naming the phase and step, the same on both, before any update from it."""
    assert [(two_ranks / f"nan-rank-{r}.txt").read_text() for r in (0, 1)] == [NAN_AT_STEP_2] * 2


def test_step_loss_checks_the_union_loss_like_a_single_process(monkeypatch):
    def all_reduce(t, op=None):  # a second rank with this rank's values (MAX: the same)
        if op is None:
            t.mul_(2)

    ctx = distributed.DistContext(rank=0, world_size=2)
    monkeypatch.setattr(distributed.tdist, "all_reduce", all_reduce)
    scaled, value = ctx.step_loss(torch.tensor(0.25), 0.5)
    assert value == 0.25 and float(scaled) == 0.25
    x, y = toy_data()
    batches = [(x[i : i + 5], y[i : i + 5] * (float("nan") if i == 10 else 1.0)) for i in range(0, 40, 5)]
    with pytest.raises(TrainingError) as err:  # batch 3 is this rank's part of step 2
        toy_train(ListTask(batches), dist=ctx, phase="supernet")
    assert str(err.value) == NAN_AT_STEP_2
    with pytest.raises(TrainingError, match=r"^darts: the training loss became inf at epoch 4, step 1; lower strategy"):
        ctx.step_loss(torch.tensor(float("inf")), 0.5, "darts", "epoch 4, step 1", "lower strategy.lr?")


def test_shard_of_a_stream_and_its_errors():
    ctx = distributed.DistContext(rank=1, world_size=2)  # shard() needs no process group
    assert list(ctx.shard(["a", "b", "c", "d", "e"])) == [("b", 0.5), ("d", 0.5)]  # "e" has no partner: dropped
    with pytest.raises(ConfigError, match="fewer than the 3 processes"):
        list(distributed.DistContext(rank=0, world_size=3).shard(["a", "b"]))
    with pytest.raises(ConfigError, match="cannot be split across 2 processes"):
        list(ctx.shard([torch.zeros(3)]))


def test_node_batch_shards_are_disjoint_and_cover_the_mask():
    from attnas.tasks.node_classification import NodeBatch

    mask = torch.tensor([1, 0, 1, 1, 0, 1, 1], dtype=torch.bool)
    b = NodeBatch(torch.randn(7, 2), torch.zeros(2, 0, dtype=torch.long), torch.zeros(7, dtype=torch.long), mask)
    parts = [b.shard(r, 2) for r in range(2)]
    assert parts[0][0].mask.tolist() == [1, 0, 0, 1, 0, 0, 1] and parts[0][1] == pytest.approx(3 / 5)
    assert parts[1][0].mask.tolist() == [0, 0, 1, 0, 0, 1, 0] and parts[1][1] == pytest.approx(2 / 5)
    assert parts[0][0].x is b.x and parts[0][0].cache is b.cache


def test_follower_run_writes_nothing(tmp_path):
    from attnas.runs.run_dir import RunDir

    run = RunDir.create(tmp_path / "run", "name: x\n", {})
    run.save_checkpoint("s", 1, {"v": 1})
    run.close()
    before = sorted((p.name, p.stat().st_size) for p in (tmp_path / "run").rglob("*"))
    f = distributed.FollowerRun(tmp_path / "run")
    f.lock()
    f.log({"phase": "a"})
    f.save_checkpoint("s", 2, {"v": 2})
    f.write_json("metrics.json", {})
    f.write_text("arch.json", "{}")
    f.update_run_info(status="x")
    f.rewind_events()
    assert f.load_checkpoint("s")["state"] == {"v": 1}  # reads work
    assert sorted((p.name, p.stat().st_size) for p in (tmp_path / "run").rglob("*")) == before


def test_two_process_supernet_training_equals_one_process(ddp_recipe, two_ranks, tmp_path):
    """Full-batch graph: each rank scores half the training nodes; dropout stays in (same masks)."""
    from attnas import pipeline
    from attnas.runs.checkpoint_files import load_checkpoint_file

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the spawned ranks
    try:
        pipeline.search(ddp_recipe, out=tmp_path / "one")
    finally:
        torch.set_num_threads(threads)

    def weights(run, epoch):
        return load_checkpoint_file(run / "checkpoints" / f"supernet-{epoch:08d}.ckpt")["state"]["model"]

    ddp, one = weights(two_ranks / "ddp", 4), weights(tmp_path / "one", 4)
    assert ddp.keys() == one.keys()
    for k in one:
        torch.testing.assert_close(ddp[k], one[k], rtol=1e-5, atol=1e-6)
    mid = weights(two_ranks / "ddp", 2)  # the comparison is not trivial: training moved the weights
    assert max((ddp[k] - mid[k]).abs().max().item() for k in ddp) > 1e-3
    # rank 0 alone wrote the run: each epoch logged once, then it finished the search alone
    events = [json.loads(line) for line in (two_ranks / "ddp" / "events.jsonl").read_text().splitlines()]
    sup = [e for e in events if e["phase"] == "supernet"]
    assert [e["epoch"] for e in sup] == list(range(1, 5))
    ref = [json.loads(line) for line in (tmp_path / "one" / "events.jsonl").read_text().splitlines()]
    assert [e["loss"] for e in sup] == pytest.approx([e["loss"] for e in ref if e["phase"] == "supernet"], rel=1e-4)
    assert json.loads((two_ranks / "ddp" / "run.json").read_text())["world_size"] == 2
    assert (two_ranks / "ddp" / "metrics.json").exists()


# ---------------------------------------------------------------- DARTS (bilevel) data-parallel


class ToyRelaxed(nn.Module):
    """A two-operation mixed edge ``sum_i softmax(alpha)_i tanh(op_i(x))`` and a linear head."""

    def __init__(self):
        super().__init__()
        self.ops = nn.ModuleList([nn.Linear(4, 6), nn.Linear(4, 6)])
        self.head = nn.Linear(6, 3)
        self.alpha = nn.Parameter(torch.tensor([0.3, -0.2]))

    def forward(self, batch):
        w = torch.softmax(self.alpha, 0)
        return self.head(sum(wi * torch.tanh(op(batch[0])) for wi, op in zip(w, self.ops)))

    def arch_parameters(self):
        return [self.alpha]

    def weight_parameters(self):
        return [p for n, p in self.named_parameters() if n != "alpha"]


class ToySpace:
    name = "toy"

    def require(self, capability, strategy):
        pass

    def relaxed(self, task):
        return ToyRelaxed()

    def derive(self, model):
        from attnas.core.arch import Arch

        return Arch("toy", {"op": int(model.alpha.argmax())})


class BilevelListTask(ListTask):
    """Splits ``a`` (weights) and ``b`` (architecture), each a fixed list of batches."""

    metric = "accuracy"

    def batches(self, split, shuffle=False, generator=None, batch_size=None):
        yield from self._batches[split]


def toy_bilevel(per_batch):
    x, y = toy_data()  # a: the first 30 rows, b: the last 10 (b's pass restarts within an epoch)
    return BilevelListTask({"a": [(x[i : i + per_batch], y[i : i + per_batch]) for i in range(0, 30, per_batch)],
                            "b": [(x[i : i + per_batch], y[i : i + per_batch]) for i in range(30, 40, per_batch)]})


def toy_darts(run, per_batch):
    from attnas.strategies.darts import Darts, DartsConfig
    from attnas.strategies.darts_config import DartsOptimConfig

    cfg = DartsConfig(epochs=3, optim=DartsOptimConfig(batch_size=per_batch), arch_lr=0.05, eval_split="",
                      splits=("a", "b"))
    return Darts(cfg, ToySpace(), toy_bilevel(per_batch), run, seed=0).search()


def test_two_process_darts_equals_one_process_on_the_union_batches(two_ranks, tmp_path):
    """Both steps of first-order DARTS (SGD on the weights, Adam on alpha) on 2 gloo ranks with
    batches of 5 end where one process ends with batches of 10 (each the union of the two ranks')."""
    from attnas.runs.checkpoint_files import load_checkpoint_file
    from attnas.runs.run_dir import RunDir

    one = RunDir.create(tmp_path / "one", "name: toy\n", {})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = toy_darts(one, per_batch=10)
    finally:
        torch.set_num_threads(threads)

    def final(run):
        return load_checkpoint_file(run / "checkpoints" / "darts-00000003.ckpt")["state"]["model"]

    ddp, ref = final(two_ranks / "darts"), final(tmp_path / "one")
    for k in ref:
        torch.testing.assert_close(ddp[k], ref[k], rtol=1e-5, atol=1e-6)
    assert (ref["alpha"] - torch.tensor([0.3, -0.2])).abs().max() > 1e-2  # alpha did move
    events = [[json.loads(line) for line in (r / "events.jsonl").read_text().splitlines()]
              for r in (two_ranks / "darts", tmp_path / "one")]
    assert [e["epoch"] for e in events[0]] == [1, 2, 3]  # rank 0 alone logged, once per epoch
    for got, want in zip(*events):
        assert (got["loss"], got["arch_loss"]) == pytest.approx((want["loss"], want["arch_loss"]), rel=1e-5)
        assert got["alpha"] == want["alpha"] and got["arch"] == want["arch"]
    assert result.arch.choices == {"op": int(ref["alpha"].argmax())}
