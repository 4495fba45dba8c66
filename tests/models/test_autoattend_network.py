"""AutoAttend networks: the supernet runs exactly the sampled sub-network; context-aware sharing."""

from __future__ import annotations

import random

import pytest
import torch
from torch_geometric.data import Data

from attnas.models.autoattend_network import context_key
from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
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


def assert_standalone_equals_supernet(space, task, supernet, archs=15, seed=0):
    """Sampled architectures built alone with inherited weights compute what the supernet does.

    Returns:
        The stand-alone outputs, one per architecture.
    """
    rng, outputs = random.Random(seed), []
    for _ in range(archs):
        arch = space.sample(rng)
        model = space.build(arch, task).eval()
        model.load_from_supernet(supernet)
        with torch.no_grad():
            outputs.append(model(task.batch()))
            assert torch.allclose(supernet(task.batch(), arch), outputs[-1], atol=1e-5)
    return outputs


@pytest.mark.parametrize("pool,ops", [("pyg", ()), ("mp", ())])
def test_supernet_equals_standalone_with_inherited_weights(pool, ops):
    torch.manual_seed(0)
    task = TinyTask()
    space = AutoAttendSpace(AutoAttendConfig(layers=3, hidden=16, pool=pool, ops=ops, act="tanh"))
    supernet = space.supernet(task).eval()
    assert_standalone_equals_supernet(space, task, supernet)


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


class SparseTinyTask(TinyTask):
    """Bag-of-words-like features (under 20 % non-zero: the stem keeps them sparse), no self-loops."""

    def __init__(self, n=30, f=40, c=3, seed=0):
        super().__init__(n, f, c, seed)
        g = torch.Generator().manual_seed(seed + 1)
        self.x = torch.where(torch.rand(n, f, generator=g) < 0.1, 1.0, 0.0)
        self.edge_index = self.edge_index[:, self.edge_index[0] != self.edge_index[1]]


@pytest.mark.parametrize("pool,stem,head", [("pyg", "raw", "none"), ("mp", "raw", "none"), ("pyg", "raw", "linear"),
                                            ("pyg", "project", "none")])
def test_raw_input_and_score_output_supernet_equals_standalone(pool, stem, head):
    torch.manual_seed(0)
    task = SparseTinyTask()
    assert task.batch().sparse_x is not None
    space = AutoAttendSpace(AutoAttendConfig(layers=3, hidden=16, pool=pool, act="tanh", stem=stem, head=head))
    supernet = space.supernet(task).eval()
    for out in assert_standalone_equals_supernet(space, task, supernet):
        assert out.shape == (30, 3)
    if stem == "raw":
        assert not hasattr(supernet.stem.proj, "weight")
    if head == "none":
        assert not list(supernet.head.parameters())


def _copy(dst, src):
    dst.load_state_dict(src.state_dict())


def test_the_space_holds_gat_and_gcn_as_they_are():
    """With raw input and class-score output, the in-space GAT and GCN are the hand-designed networks."""
    from attnas.core.arch import Arch
    from attnas.spaces.gnn_baselines import GAT, GCN

    torch.manual_seed(0)
    task = SparseTinyTask()
    chain = lambda a, b: Arch("autoattend", {"layers": [  # noqa: E731
        {"type": "add", "inputs": [{"source": 0, "op": a}, {"source": 0, "op": "zero"}]},
        {"type": "add", "inputs": [{"source": 1, "op": b}, {"source": 0, "op": "zero"}]}]})
    gat_space = AutoAttendSpace(AutoAttendConfig(layers=2, hidden=64, stem="raw", head="none", act="elu"))
    model = gat_space.build(chain("gat_8", "gat_1"), task).eval()
    ref = GAT(40, 8, 8, 3, 1, 0.6).eval()
    _copy(model.ops["L1_0"].conv, ref.conv1)
    _copy(model.ops["L2_0"].conv, ref.conv2)
    with torch.no_grad():
        assert torch.allclose(model(task.batch()), ref(task.batch()), atol=1e-5)
    gcn_space = AutoAttendSpace(AutoAttendConfig(layers=2, hidden=16, stem="raw", head="none", act="relu"))
    model = gcn_space.build(chain("gcn", "gcn"), task).eval()
    ref = GCN(40, 16, 3, 0.5).eval()
    _copy(model.ops["L1_0"].conv, ref.conv1)
    _copy(model.ops["L2_0"].conv, ref.conv2)
    with torch.no_grad():
        assert torch.allclose(model(task.batch()), ref(task.batch()), atol=1e-5)


def test_context_warmup_shares_one_module_then_splits_from_it():
    task = SparseTinyTask()
    space = AutoAttendSpace(AutoAttendConfig(layers=2, hidden=8, ops=("zero", "gcn", "sage"), stem="raw", head="none"))
    supernet = space.supernet(task).train()
    supernet.share_contexts(True)
    rng = random.Random(0)
    for _ in range(10):
        arch = space.sample(rng)
        supernet(task.batch(), arch).sum().backward()
    trained = {k for k, m in supernet.ops.items() if any(p.grad is not None for p in m.parameters())}
    # one module per connection and operation took every context's gradients
    assert trained and all(supernet._shared_key[k] == k for k in trained)
    with torch.no_grad():
        for p in supernet.ops["s1_t2_gcn_add_add"].parameters():
            p.add_(1.0)
    supernet.split_contexts()
    assert not supernet.contexts_shared
    for key in ("s1_t2_gcn_attn_q", "s1_t2_gcn_add_v"):
        for a, b in zip(supernet.ops[key].parameters(), supernet.ops["s1_t2_gcn_add_add"].parameters()):
            assert torch.equal(a, b) and a is not b
    with torch.no_grad():  # after the split, an architecture runs its own contexts' modules again
        arch = space.sample(random.Random(3))
        model = space.build(arch, task).eval()
        model.load_from_supernet(supernet)
        assert torch.allclose(supernet.eval()(task.batch(), arch), model(task.batch()), atol=1e-5)
