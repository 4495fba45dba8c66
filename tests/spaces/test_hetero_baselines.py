"""The heterophily baselines: MLP, GCN, GAT and GAT-sep are points of the hetero space; all eight train."""

from __future__ import annotations

import pytest
import torch

from attnas.comparison.plan import plan_rows
from attnas.core.arch import Arch
from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
from attnas.spaces.gnn_baselines import GAT, GCN
from attnas.spaces.hetero_baselines import MLP, MODELS, HeteroBaselineConfig, HeteroBaselineSpace, h2gcn_adjacencies
from attnas.tasks.heterophilous import HeterophilousConfig, HeterophilousTask
from heterophilous_files import write


@pytest.fixture
def task(tmp_path):
    write(tmp_path)
    return HeterophilousTask(HeterophilousConfig(dataset="tiny"), tmp_path)


def chain(a: str, b: str) -> Arch:
    return Arch("autoattend", {"layers": [
        {"type": "add", "inputs": [{"source": 0, "op": a}, {"source": 0, "op": "zero"}]},
        {"type": "add", "inputs": [{"source": 1, "op": b}, {"source": 0, "op": "zero"}]}]})


def copy_into(dst: torch.nn.Module, src: torch.nn.Module) -> None:
    dst.load_state_dict(src.state_dict())


@pytest.mark.parametrize("ops,act,reference,pairs", [
    (("linear", "linear"), "relu", lambda i, c: MLP(i, 64, c, 0.5), (("L1_0", "conv1"), ("L2_0", "conv2"))),
    (("gcn", "gcn"), "relu", lambda i, c: GCN(i, 64, c, 0.5), (("L1_0", "conv1"), ("L2_0", "conv2"))),
    (("gat_8", "gat_1"), "elu", lambda i, c: GAT(i, 8, 8, c, 1, 0.6), (("L1_0", "conv1"), ("L2_0", "conv2"))),
    (("gat_sep_8", "gat_sep_1"), "elu", lambda i, c: GAT(i, 8, 8, c, 1, 0.6, separate=True),
     (("L1_0", "conv1"), ("L2_0", "conv2"))),
])
def test_hand_designed_networks_are_points_of_the_space(task, ops, act, reference, pairs):
    torch.manual_seed(0)
    space = AutoAttendSpace(AutoAttendConfig(layers=2, hidden=64, pool="hetero", stem="raw", head="none", act=act))
    model = space.build(chain(*ops), task).eval()
    ref = reference(task.info.in_dim, task.info.num_classes).eval()
    for mine, theirs in pairs:
        copy_into(model.ops[mine].conv, getattr(ref, theirs))
    batch = next(task.batches("train"))
    with torch.no_grad():
        assert torch.allclose(model(batch), ref(batch), atol=1e-5)


def test_the_hetero_pool_declares_the_eight_baselines_and_compare_plans_them():
    _, rows = plan_rows("autoattend-hetero-quick")
    assert [r.name for r in rows] == ["search", "random", *MODELS]
    assert all(r.recipe["space"]["name"] == "hetero-baseline" for r in rows[2:])


def test_every_baseline_trains(task):
    space = HeteroBaselineSpace(HeteroBaselineConfig())
    batch = next(task.batches("train"))
    for m in MODELS:
        model = space.build(space.arch({"model": m}), task).train()
        out = model(batch)
        assert out.shape == (20, 3), m
        task.loss(out, batch).backward()
        assert all(p.grad is not None for p in model.parameters() if p.requires_grad), m


def test_h2gcn_separates_one_hop_from_strict_two_hop_neighbours():
    path = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])  # 0 - 1 - 2 - 3
    a1, a2 = (a.to_dense() for a in h2gcn_adjacencies(path, 4))
    assert set(map(tuple, (a1 > 0).nonzero().tolist())) == set(map(tuple, path.t().tolist()))
    assert set(map(tuple, (a2 > 0).nonzero().tolist())) == {(0, 2), (2, 0), (1, 3), (3, 1)}
    assert torch.isclose(a1[0, 1], torch.tensor(1 / 2 ** 0.5))  # D^-1/2 A D^-1/2 with degrees 1 and 2
