"""AutoAttend search space (Sec. 4.1): counting, sampling, mutation, validation, DAGs."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError
from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace

SUBSETS = [c for r in range(4) for c in itertools.combinations((1, 2, 3), r)]


def space(layers=2, ops=("zero", "gcn", "sage"), constraints=(1, 2, 3), layer_types=("add", "attn")):
    return AutoAttendSpace(AutoAttendConfig(layers=layers, ops=ops, constraints=constraints,
                                            layer_types=layer_types, hidden=8, heads=4))


@pytest.mark.parametrize("n,ops", [(1, ("zero", "gcn")), (2, ("zero", "gcn")), (2, ("zero", "gcn", "sage"))])
def test_paper_formulas_match_brute_force(n, ops):
    b = len(ops)
    constrained = space(n, ops, (1, 2, 3))
    free = space(n, ops, ())
    formula_c = 1
    formula_f = 1
    for k in range(1, n + 1):
        formula_c *= b * (b - 1) * k + (b - 1) ** 3 * k
        formula_f *= k**2 * b**2 + k**3 * b**3
    assert constrained.size() == formula_c == sum(1 for _ in constrained.enumerate())
    assert free.size() == formula_f == sum(1 for _ in free.enumerate())


@pytest.mark.parametrize("constraints", SUBSETS)
def test_size_matches_enumeration_for_every_constraint_subset(constraints):
    s = space(2, ("zero", "gcn"), constraints)
    archs = list(s.enumerate())
    assert len(archs) == s.size()
    assert len({a.key() for a in archs}) == len(archs)


def test_baseline_space_without_attention_layer():
    s = space(2, ("zero", "gcn", "sage"), (1, 2, 3), layer_types=("add",))
    assert s.size() == (3 * 2 * 1) * (3 * 2 * 2) == sum(1 for _ in s.enumerate())


@pytest.mark.parametrize("constraints", SUBSETS)
def test_samples_and_mutations_are_valid(constraints):
    s = AutoAttendSpace(AutoAttendConfig(layers=4, constraints=constraints))
    rng = random.Random(0)
    kinds = set()
    for _ in range(200):
        a = s.sample(rng)
        s.validate(a)
        m = s.mutate(a, rng)
        s.validate(m)
        assert m != a
        diff = [(x, y) for x, y in zip(a.choices["layers"], m.choices["layers"]) if x != y]
        assert len(diff) == 1  # one layer changed
        x, y = diff[0]
        kinds.add("type" if x["type"] != y["type"] else
                  "source" if [c["source"] for c in x["inputs"]] != [c["source"] for c in y["inputs"]] else "op")
    assert kinds == {"type", "source", "op"}


def test_prior_covers_the_tiny_space():
    s = space(1, ("zero", "gcn"), (1, 2, 3))
    rng = random.Random(1)
    seen = {s.sample(rng).key() for _ in range(500)}
    assert seen == {a.key() for a in s.enumerate()}


@pytest.mark.parametrize("layer,message", [
    ({"type": "mul", "inputs": []}, "unknown layer type 'mul'"),
    ({"type": "add", "inputs": [{"source": 0, "op": "gcn"}]}, "takes 2 inputs"),
    ({"type": "add", "inputs": [{"source": 0, "op": "gcn"}, {"source": 5, "op": "gcn"}]}, "source layer 5 out of range"),
    ({"type": "add", "inputs": [{"source": 0, "op": "zero"}, {"source": 0, "op": "gcn"}]}, "constraint 3"),
    ({"type": "attn", "inputs": [{"source": 0, "op": "gcn"}, {"source": 0, "op": "gcn"}, {"source": 0, "op": "zero"}]},
     "constraint 3"),
    ({"type": "add", "inputs": [{"source": 0, "op": "gcn"}, {"source": 0, "op": "gat_3"}]}, "unknown operation 'gat_3'"),
    ({"type": "add", "inputs": [{"source": 0, "op": "gcn"}, {"src": 0, "op": "gcn"}]}, "keys 'source' and 'op'"),
])
def test_validation_names_the_problem(layer, message):
    s = AutoAttendSpace(AutoAttendConfig(layers=1))
    with pytest.raises(ArchError, match=message):
        s.validate(Arch("autoattend", {"layers": [layer]}))


def test_constraints_1_and_2_checked():
    s = AutoAttendSpace(AutoAttendConfig(layers=2))
    ok = {"type": "add", "inputs": [{"source": 0, "op": "gcn"}, {"source": 0, "op": "gcn"}]}
    bad_skeleton = {"type": "add", "inputs": [{"source": 0, "op": "gcn"}, {"source": 1, "op": "gcn"}]}
    with pytest.raises(ArchError, match="constraint 1"):
        s.validate(Arch("autoattend", {"layers": [ok, bad_skeleton]}))
    bad_kv = {"type": "attn", "inputs": [{"source": 1, "op": "gcn"}, {"source": 0, "op": "gcn"},
                                         {"source": 1, "op": "gcn"}]}
    with pytest.raises(ArchError, match="constraint 2"):
        s.validate(Arch("autoattend", {"layers": [ok, bad_kv]}))
    free = AutoAttendSpace(AutoAttendConfig(layers=2, constraints=()))
    free.validate(Arch("autoattend", {"layers": [ok, bad_kv]}))
    with pytest.raises(ArchError, match="expected 2 layers"):
        s.validate(Arch("autoattend", {"layers": [ok]}))
    with pytest.raises(ArchError, match="not 'autoattend'"):
        s.validate(Arch("hoga", {"layers": [ok, ok]}))


def test_bad_space_options():
    with pytest.raises(ConfigError, match="unknown operation in pool 'pyg' 'gcnn'"):
        AutoAttendSpace(AutoAttendConfig(ops=("gcnn",)))
    with pytest.raises(ConfigError, match="unknown space.pool 'pyx'"):
        AutoAttendSpace(AutoAttendConfig(pool="pyx"))
    with pytest.raises(ConfigError, match="not divisible by space.heads"):
        AutoAttendConfig(hidden=30, heads=4)


def test_to_dag_is_a_topological_dag_with_known_labels():
    s = AutoAttendSpace(AutoAttendConfig(layers=3))
    vocab = set(s.dag_vocabulary())
    rng = random.Random(3)
    for _ in range(50):
        a = s.sample(rng)
        adj, labels = s.to_dag(a)
        n = len(labels)
        assert adj.shape == (n, n)
        assert (np.tril(adj) == 0).all()  # edges only go forward: topological order
        assert labels[0] == "input" and labels[-1] == "output"
        assert set(labels) <= vocab
    # different architectures give different DAGs
    a, b = s.sample(rng), s.sample(rng)
    if a != b:
        assert s.to_dag(a)[1] != s.to_dag(b)[1] or (s.to_dag(a)[0] != s.to_dag(b)[0]).any()


@pytest.mark.parametrize("constraints", [(1, 2, 3), ()])
def test_from_dag_inverts_to_dag(constraints):
    s = AutoAttendSpace(AutoAttendConfig(layers=4, constraints=constraints))
    rng = random.Random(7)
    for _ in range(100):
        a = s.sample(rng)
        adj, labels = s.to_dag(a)
        assert s.from_dag(adj, labels) == a


def test_from_dag_rejects_broken_graphs():
    s = AutoAttendSpace(AutoAttendConfig(layers=2))
    adj, labels = s.to_dag(s.sample(random.Random(0)))
    with pytest.raises(ArchError, match="must start with an 'input' node"):
        s.from_dag(adj, ["x"] + labels[1:])
    bad = list(labels)
    bad[1] = "gcnn@" + bad[1].split("@")[1]
    with pytest.raises(ArchError, match="unknown operation 'gcnn'"):
        s.from_dag(adj, bad)
    cut = adj.copy()
    cut[0, 1] = 0  # a connection without a source layer
    with pytest.raises(ArchError, match="is not a connection from an earlier layer"):
        s.from_dag(cut, labels)


def raw_space(layers=2, ops=("zero", "identity", "gcn", "sage"), constraints=(1, 2, 3), head="none",
              layer_types=("add", "attn")):
    return AutoAttendSpace(AutoAttendConfig(layers=layers, ops=ops, constraints=constraints, hidden=8, heads=4,
                                            stem="raw", head=head, layer_types=layer_types))


GCN = {"layers": [{"type": "add", "inputs": [{"source": 0, "op": "gcn"}, {"source": 0, "op": "zero"}]},
                  {"type": "add", "inputs": [{"source": 1, "op": "gcn"}, {"source": 0, "op": "zero"}]}]}


@pytest.mark.parametrize("constraints", SUBSETS)
@pytest.mark.parametrize("layers,head", [(2, "none"), (3, "none"), (2, "linear")])
def test_identity_only_where_widths_agree_and_size_counts_it(constraints, layers, head):
    ops = ("zero", "identity", "gcn") if layers == 2 else ("identity", "gcn")  # 3 layers with zero: minutes
    # 3 layers with attention layers take seconds a case (241,920 layer combinations validated):
    # with all constraints and with none; the other subsets, addition layers only (2,304)
    layer_types = ("add", "attn") if layers == 2 or constraints in ((1, 2, 3), ()) else ("add",)
    s = raw_space(layers, ops, constraints, head, layer_types)
    archs = list(s.enumerate())
    assert len(archs) == s.size() == len({a.key() for a in archs})
    for a in archs:
        for t, layer in enumerate(a.choices["layers"], start=1):
            for conn in layer["inputs"]:
                if conn["op"] == "identity":
                    assert conn["source"] > 0 and (t < layers or head == "linear")
    assert any(c["op"] == "identity" for a in archs for layer in a.choices["layers"] for c in layer["inputs"]) == (
        layers == 3 or head == "linear")


@pytest.mark.parametrize("constraints", SUBSETS)
def test_raw_input_samples_and_mutations_never_use_identity_across_widths(constraints):
    s = raw_space(3, ("zero", "identity", "gcn", "sage"), constraints)
    rng = random.Random(0)
    for _ in range(300):
        a = s.sample(rng)
        s.validate(a)
        m = s.mutate(a, rng)
        s.validate(m)
        assert m != a


def test_identity_across_widths_is_refused_with_the_reason():
    s = raw_space()
    with pytest.raises(ArchError, match="identity cannot connect layer 0 to layer 1.*raw input"):
        s.validate(Arch("autoattend", {"layers": [
            {"type": "add", "inputs": [{"source": 0, "op": "gcn"}, {"source": 0, "op": "identity"}]}, GCN["layers"][1]]}))
    with pytest.raises(ArchError, match="identity cannot connect layer 1 to layer 2.*class scores"):
        s.validate(Arch("autoattend", {"layers": [
            GCN["layers"][0], {"type": "add", "inputs": [{"source": 1, "op": "identity"}, {"source": 0, "op": "gcn"}]}]}))
    s.validate(Arch("autoattend", GCN))  # Kipf & Welling's GCN is in the space
    with pytest.raises(ConfigError, match="need an operation that changes the width"):
        raw_space(ops=("zero", "identity"))
    with pytest.raises(ConfigError, match="unknown activation 'softplus'"):
        AutoAttendConfig(out_act="softplus")


def test_eq7_pool_has_no_identity():
    """Sec. 5.2.1: every CiteSeer / PubMed operation has the Eq. 7 form, zero aside."""
    s = AutoAttendSpace(AutoAttendConfig(pool="mp", hidden=16))
    assert "identity" not in s.ops and "zero" in s.ops
    assert set(s.ops) - {"zero"} == {"const", "gcn", "gat", "sym_gat", "cos", "linear", "gene_linear"}
