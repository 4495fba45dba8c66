"""The ENAS macro space: D-VAE's DAGs exactly, from_dag the inverse of to_dag, clear refusals."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from attnas.core.errors import ArchError, ConfigError, UnsupportedError
from attnas.data.enas import VOCAB, read_rows, rows_to_dag
from attnas.spaces.enas import OPS, EnasConfig, EnasSpace


def _rows(rng: random.Random, layers: int = 6) -> list[list[int]]:
    return [[rng.randrange(6)] + [rng.randrange(2) for _ in range(k)] for k in range(layers)]


def test_to_dag_is_d_vaes_dag_of_the_file_rows():
    space = EnasSpace()
    rng = random.Random(0)
    for _ in range(50):
        rows = _rows(rng)
        adj, types = rows_to_dag(rows)  # D-VAE's reading of a file line
        labels = [VOCAB[t] for t in types]
        arch = space.from_dag(adj, labels)
        space.validate(arch)
        adj2, labels2 = space.to_dag(arch)
        assert labels2 == labels
        np.testing.assert_array_equal(adj2, adj)
        # the choices say the same as the flags: layer k+1 skips from vertex j when flag j is set
        for k, row in enumerate(rows):
            assert arch.choices["layers"][k] == {"op": OPS[row[0]], "skips": [j for j, f in enumerate(row[1:]) if f]}


def test_real_file_rows_are_architectures_of_the_space(data_root):
    rows, _ = read_rows(data_root / "enas" / "final_structures6.txt")
    space = EnasSpace()
    for r in rows[:300]:
        adj, types = rows_to_dag(r)
        arch = space.from_dag(adj, [VOCAB[t] for t in types])
        assert np.array_equal(space.to_dag(arch)[0], adj)


def test_sample_and_mutate_stay_valid_and_differ():
    space = EnasSpace()
    rng = random.Random(1)
    for _ in range(200):
        a = space.sample(rng)
        space.validate(a)
        b = space.mutate(a, rng)
        space.validate(b)
        assert b.key() != a.key()


def test_size_counts_every_dag_from_dag_accepts():
    """Brute force over every labelled DAG on 4 vertices: exactly size() are 2-layer ENAS architectures."""
    space = EnasSpace(EnasConfig(layers=2))
    pairs = [(u, v) for v in range(4) for u in range(v)]
    accepted = set()
    for bits in itertools.product([0, 1], repeat=len(pairs)):
        adj = np.zeros((4, 4), dtype=np.int64)
        for (u, v), b in zip(pairs, bits):
            adj[u, v] = b
        for ops in itertools.product(OPS, repeat=2):
            try:
                accepted.add(space.from_dag(adj, ["input", *ops, "output"]).key())
            except ArchError:
                pass
    assert space.size() == len(accepted) == 6**2 * 2
    assert EnasSpace().size() == 6**6 * 2**15


@pytest.mark.parametrize(("edit", "match"), [
    (lambda a, l: (a.__setitem__((2, 3), 0), l), "layer 3 lacks its edge from vertex 2"),
    (lambda a, l: (a, l[:-1] + ["conv3"]), "end with an 'output'"),
    (lambda a, l: (a, l[:2] + ["conv7"] + l[3:]), "unknown operation 'conv7'"),
    (lambda a, l: (a.__setitem__((2, 7), 1), l), "layer 2 feeds the output"),
    (lambda a, l: (a[:7, :7], l[:7]), "has 8 vertices"),
])
def test_from_dag_refuses_what_is_no_enas_architecture(edit, match):
    space = EnasSpace()
    adj, labels = space.to_dag(space.sample(random.Random(2)))
    adj = adj.copy()
    res = edit(adj, list(labels))
    adj2, labels2 = (adj, res[1]) if res[0] is None else res
    with pytest.raises(ArchError, match=match):
        space.from_dag(adj2, labels2)


def test_validate_names_the_bad_choice():
    space = EnasSpace()
    good = space.sample(random.Random(3)).choices
    bad = {"layers": [dict(layer) for layer in good["layers"]]}
    bad["layers"][3] = {"op": "conv3", "skips": [3]}
    with pytest.raises(ArchError, match="layer 4: skip from vertex 3 out of range 0..2"):
        space.validate(space.arch(bad))
    bad["layers"][3] = {"op": "sep7", "skips": []}
    with pytest.raises(ArchError, match="did you mean 'sep5'"):
        space.validate(space.arch(bad))
    with pytest.raises(ArchError, match="expected 6 layers"):
        space.validate(space.arch({"layers": good["layers"][:5]}))
    with pytest.raises(ConfigError, match="space.layers"):
        EnasConfig(layers=0)


def test_no_networks_are_built():
    space = EnasSpace()
    with pytest.raises(UnsupportedError, match="scored from a table"):
        space.build(space.sample(random.Random(0)), None)
    assert space.dag_vocabulary() == list(VOCAB)
    assert "max3(+0,1)" in space.describe(space.arch({"layers": [
        {"op": "conv3", "skips": []}, {"op": "sep3", "skips": []}, {"op": "max3", "skips": [0, 1]},
        {"op": "avg3", "skips": []}, {"op": "conv5", "skips": []}, {"op": "sep5", "skips": []}]}))
