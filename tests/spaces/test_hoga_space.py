"""The HOGA search space: the architecture distribution, validation, networks, derive, DAG."""

from __future__ import annotations

import random

import pytest
import torch

from attnas import registry
from attnas.config import from_mapping
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError
from attnas.ops.autola.attention_modules import HOGA_OPS
from attnas.ops.autola.hoga_cell import HOGA
from attnas.ops.autola.hoga_relaxed import RelaxedHOGA
from attnas.spaces.hoga import FIGURE3_EDGES, HOGAConfig, HOGASpace
from attnas.tasks.base import TaskInfo


class TinyTask:
    """Only what the space reads from a task."""

    info = TaskInfo(kind="image", in_dim=1, num_classes=3)


def space(**kw) -> HOGASpace:
    return HOGASpace(HOGAConfig(**kw))


def test_registered_with_capabilities():
    cls = registry.get("space", "hoga")
    assert cls is HOGASpace
    assert cls.capabilities == {"relaxed", "dag"}


def test_size_is_pool_to_the_number_of_edges():
    assert space().size() == 9 ** 10
    assert space(groups=2).size() == 9 ** 3
    assert space(ops=("se", "cbam", "zero")).size() == 3 ** 10


def test_sample_is_valid_and_varied():
    sp, rng = space(), random.Random(0)
    archs = [sp.sample(rng) for _ in range(20)]
    for a in archs:
        sp.validate(a)
        assert set(a.choices["edges"]) == set(sp.edge_keys)
    assert len({a.key() for a in archs}) == 20
    assert {o for a in archs for o in a.choices["edges"].values()} == set(HOGA_OPS)


def test_mutate_changes_exactly_one_edge():
    sp, rng = space(), random.Random(1)
    a = sp.sample(rng)
    for _ in range(10):
        b = sp.mutate(a, rng)
        sp.validate(b)
        diff = [k for k in sp.edge_keys if a.choices["edges"][k] != b.choices["edges"][k]]
        assert len(diff) == 1


def test_validate_names_the_problem():
    sp = space()
    edges = dict(FIGURE3_EDGES)
    sp.validate(sp.cell(edges))
    with pytest.raises(ArchError, match="unknown operation 'cbma' on edge 2-2 \\(did you mean 'cbam'\\?\\)"):
        sp.validate(sp.cell({**edges, "2-2": "cbma"}))
    with pytest.raises(ArchError, match="unknown operations 'x' on edge 0-0.*'y' on edge 1-1"):
        sp.validate(sp.cell({**edges, "0-0": "x", "1-1": "y"}))
    with pytest.raises(ArchError, match="missing edge 3-3"):
        sp.validate(sp.cell({k: v for k, v in edges.items() if k != "3-3"}))
    with pytest.raises(ArchError, match="unknown edge '4-4'"):
        sp.validate(sp.cell({**edges, "4-4": "se"}))
    with pytest.raises(ArchError, match="2 groups but the space is configured with groups=4"):
        sp.validate(Arch("hoga", {"groups": 2, "edges": {"0-0": "se", "0-1": "se", "1-1": "se"}}))
    with pytest.raises(ArchError, match="unknown key 'edge'"):
        sp.validate(Arch("hoga", {"groups": 4, "edge": edges}))
    with pytest.raises(ArchError, match="not in this space's operation pool"):
        space(ops=("se", "identity")).validate(sp.cell(edges))
    with pytest.raises(ArchError, match="space 'other'"):
        sp.validate(Arch("other", {"groups": 4, "edges": edges}))


def test_config_is_validated():
    with pytest.raises(ConfigError, match="unknown operation 'sse'"):
        HOGAConfig(ops=("se", "sse"))
    with pytest.raises(ConfigError, match="width"):
        HOGAConfig(width=18, groups=4)
    with pytest.raises(ConfigError, match="listed more than once: se"):
        HOGAConfig(ops=("se", "se"))
    cfg = from_mapping(HOGAConfig, {"groups": 2, "ops": ["se", "cbam"], "backbone": "resnet32"})
    assert cfg.ops == ("se", "cbam") and cfg.groups == 2
    with pytest.raises(ConfigError, match="backbone"):
        from_mapping(HOGAConfig, {"backbone": "resnet21"})


def test_build_places_the_cell_in_every_block():
    sp = space(width=8)
    net = sp.build(sp.cell(FIGURE3_EDGES), TinyTask())
    cells = [m for m in net.modules() if isinstance(m, HOGA)]
    assert len(cells) == 9  # ResNet-20: 3 stages x 3 blocks
    assert all(c.choices == FIGURE3_EDGES for c in cells)
    x, y = torch.randn(2, 1, 12, 12), torch.tensor([0, 2])
    assert net((x, y)).shape == (2, 3)


def test_arch_json_round_trip_rebuilds_the_same_cell():
    sp = space(groups=2, width=8)
    a = sp.sample(random.Random(3))
    b = Arch.from_json(a.to_json())
    assert b == a
    net = sp.build(b, TinyTask())
    assert next(m for m in net.modules() if isinstance(m, HOGA)).choices == a.choices["edges"]


def test_relaxed_parameters_are_split():
    sp = space(width=8)
    net = sp.relaxed(TinyTask())
    arch, weights = net.arch_parameters(), net.weight_parameters()
    assert len(arch) == 1 and arch[0].shape == (10, 9)
    ids_a, ids_w = {id(p) for p in arch}, {id(p) for p in weights}
    assert not ids_a & ids_w
    assert ids_a | ids_w == {id(p) for p in net.parameters()}
    cells = net.cells()
    assert len(cells) == 9 and all(isinstance(c, RelaxedHOGA) and c.alpha is arch[0] for c in cells)
    assert net(torch.randn(2, 1, 8, 8)).shape == (2, 3)


def test_derive_takes_the_argmax_per_edge():
    sp = space(width=8)
    net = sp.relaxed(TinyTask())
    rng = random.Random(5)
    want = {k: rng.choice([o for o in HOGA_OPS if o != "zero"]) for k in sp.edge_keys}
    with torch.no_grad():
        net.alpha.normal_(0, 0.01)
        for i, k in enumerate(sp.edge_keys):
            net.alpha[i, HOGA_OPS.index(want[k])] = 1.0
            net.alpha[i, HOGA_OPS.index("se") if want[k] != "se" else 0] = 0.9  # a close runner-up
    arch = sp.derive(net)
    sp.validate(arch)
    assert arch.choices["edges"] == want
    probs = arch.meta["edge_weights"]["0-0"]
    assert max(probs, key=probs.get) == want["0-0"]


def test_derive_skips_zero_unless_asked():
    net_space, literal = space(width=8), space(width=8, derive_without_zero=False)
    net = net_space.relaxed(TinyTask())
    with torch.no_grad():
        net.alpha.zero_()
        net.alpha[:, HOGA_OPS.index("zero")] = 5.0
        net.alpha[:, HOGA_OPS.index("cbam")] = 1.0
    assert set(net_space.derive(net).choices["edges"].values()) == {"cbam"}
    assert set(literal.derive(net).choices["edges"].values()) == {"zero"}


def test_to_dag_is_topological_and_labelled():
    sp = space(groups=3, width=12)
    arch = sp.cell({"0-0": "se", "0-1": "cbam", "1-1": "zero", "0-2": "identity", "1-2": "norm_d1",
                    "2-2": "spatial_d2"})
    adj, labels = sp.to_dag(arch)
    assert labels == ["input", "se", "cbam", "zero", "identity", "norm_d1", "spatial_d2", "output"]
    assert adj.shape == (8, 8)
    assert (adj == torch.triu(torch.as_tensor(adj), 1).numpy()).all()  # edges point forward
    # input feeds the ops of edges k-k; edge 1-2 reads U_1 = ops of edges 0-1 and 1-1
    assert [i for i in range(8) if adj[0, i]] == [1, 3, 6]
    assert [i for i in range(8) if adj[i, 5]] == [2, 3]
    assert all(adj[i, 7] for i in range(1, 7))


def test_describe_and_uniform():
    sp = space(groups=2)
    text = sp.describe(sp.uniform("se"))
    assert "U_1 = se(U_0) + se(F_1)" in text


def test_alpha_arch_takes_one_operation_per_edge():
    space = HOGASpace(HOGAConfig())
    choice = [i % len(space.options.ops) for i in range(len(space.edge_keys))]
    arch = space.alpha_arch(choice)
    space.validate(arch)
    assert [arch.choices["edges"][k] for k in space.edge_keys] == [space.options.ops[i] for i in choice]
    with pytest.raises(ArchError, match=r"one column per edge"):
        space.alpha_arch([0])
