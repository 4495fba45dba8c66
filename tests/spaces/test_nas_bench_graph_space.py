"""The NAS-Bench-Graph space: sampling, mutation, neighbours, validation, DAGs."""

import random

import pytest

from attnas.core.arch import Arch
from attnas.core.errors import ArchError, UnsupportedError
from attnas.spaces.nas_bench_graph import NasBenchGraphConfig, NasBenchGraphSpace
from attnas.spaces.nas_bench_graph_canonical import canonical_code, canonical_form


@pytest.fixture(scope="module")
def space():
    return NasBenchGraphSpace()


def test_sizes_are_the_benchmarks():
    assert NasBenchGraphSpace().size() == 26_206
    assert NasBenchGraphSpace(NasBenchGraphConfig(operations="proteins")).size() == 2_021


def test_the_index_is_the_tables_keys(space):
    table = pytest.importorskip("attnas.data.nas_bench_graph")
    pytest.importorskip("nas_bench_graph")
    assert space.index.codes == table.load_table("cora").codes.tolist()
    proteins = NasBenchGraphSpace(NasBenchGraphConfig(operations="proteins"))
    assert proteins.index.codes == table.load_table("proteins").codes.tolist()


def test_samples_are_valid_canonical_and_cover_the_space(space):
    rng = random.Random(0)
    seen = set()
    for _ in range(300):
        a = space.sample(rng)
        space.validate(a)
        assert canonical_form(a.choices["links"], a.choices["ops"]) == (tuple(a.choices["links"]),
                                                                          tuple(a.choices["ops"]))
        seen.add(space.index_of(a))
    assert len(seen) > 290  # uniform over 26,206: repeats are rare


def test_mutation_is_a_different_neighbour(space):
    rng = random.Random(1)
    a = space.sample(rng)
    i = space.index_of(a)
    for _ in range(20):
        b = space.mutate(a, rng)
        j = space.index_of(b)
        assert j != i and j in space.index.neighbours(i)


def test_neighbours_differ_in_one_operation_or_one_link(space):
    i = space.index.index([0, 1, 2, 3], ["gcn", "gat", "sage", "gin"])  # a chain: no symmetries
    ns = space.index.neighbours(i)
    assert len(ns) == 4 * 8 + 6  # 8 other operations per node, 1 + 2 + 3 other parents
    changed_op = space.index.index([0, 1, 2, 3], ["gcn", "gat", "sage", "fc"])
    assert changed_op in ns
    assert i not in ns and ns == sorted(set(ns))


def test_raw_links_are_accepted_and_canonicalised(space):
    raw = space.arch({"links": [0, 1, 0, 2], "ops": ["gcn", "gat", "sage", "gin"]})
    space.validate(raw)
    assert space.index.codes[space.index_of(raw)] == canonical_code([0, 1, 0, 2], ["gcn", "gat", "sage", "gin"])


@pytest.mark.parametrize("choices, message", [
    ({"links": [0, 0, 0], "ops": ["gcn"] * 4}, "lists of 4"),
    ({"links": [0, 2, 0, 0], "ops": ["gcn"] * 4}, r"links\[1\]"),
    ({"links": [0, 0, 0, 0], "ops": ["gcn", "gcm", "gcn", "gcn"]}, r"ops\[1\].*gcn"),
    ({"links": [0, 0, 0, 0], "ops": ["skip"] * 4}, "skips only"),
    ({"links": [0, 0, 0, 0]}, "exactly the keys"),
])
def test_bad_architectures_name_the_problem(space, choices, message):
    with pytest.raises(ArchError, match=message):
        space.validate(Arch("nas-bench-graph", choices))


def test_proteins_space_refuses_its_missing_operations():
    space = NasBenchGraphSpace(NasBenchGraphConfig(operations="proteins"))
    with pytest.raises(ArchError, match="gat"):
        space.validate(space.arch({"links": [0, 0, 0, 0], "ops": ["gat"] * 4}))


def test_dag_reads_input_and_feeds_output_from_unread_nodes(space):
    adj, labels = space.to_dag(space.arch({"links": [0, 1, 1, 2], "ops": ["gcn", "gat", "sage", "gin"]}))
    assert labels == ["input", "gcn", "gat", "sage", "gin", "output"]
    assert adj[0, 1] and adj[1, 2] and adj[1, 3] and adj[2, 4]
    assert [int(adj[k, 5]) for k in range(1, 5)] == [0, 0, 1, 1]


def test_build_refuses(space):
    with pytest.raises(UnsupportedError, match="tables"):
        space.build(space.sample(random.Random(0)), None)


def test_dags_round_trip_through_from_dag(space):
    rng = random.Random(3)
    for _ in range(50):
        a = space.sample(rng)
        adj, labels = space.to_dag(a)
        assert space.from_dag(adj, labels) == a
    assert space.dag_vocabulary() == ["input", "output", *space.index.operations]


@pytest.mark.parametrize("edit, message", [
    (lambda adj: adj.__setitem__((0, 2), 1), "exactly one"),      # node 1 reads two vertices
    (lambda adj: adj.__setitem__((1, 5), 1), "output must read"),  # the output reads a read node
    (lambda adj: adj.__setitem__((3, 2), 1), "against the vertex order"),
])
def test_dags_outside_the_space_are_refused(space, edit, message):
    adj, labels = space.to_dag(space.arch({"links": [0, 1, 1, 2], "ops": ["gcn", "gat", "sage", "gin"]}))
    edit(adj)
    with pytest.raises(ArchError, match=message):
        space.from_dag(adj, labels)
    with pytest.raises(ArchError, match="input, 4 nodes, output"):
        space.from_dag(adj[:5, :5], labels[:5])
