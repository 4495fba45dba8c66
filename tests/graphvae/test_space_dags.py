"""Between spaces and graph VAEs: architectures to DAG datasets and decoded graphs back."""

from __future__ import annotations

import random

import numpy as np
import pytest

from attnas.core.errors import ConfigError
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.space_dags import SpaceDecoder, space_dataset, space_vocabulary
from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace


@pytest.fixture(scope="module")
def space():
    return AutoAttendSpace(AutoAttendConfig(layers=2, ops=("zero", "identity", "gcn", "gat_2")))


def test_dataset_graphs_decode_back_to_the_same_architectures(space):
    rng = random.Random(0)
    archs = [space.sample(rng) for _ in range(20)]
    data = space_dataset(space, archs)
    assert data.vocab == space_vocabulary(space) and data.vocab[:2] == ("input", "output")
    decoder = SpaceDecoder(space, data.vocab)
    back = decoder.archs(data.graphs)
    assert [a.key() for a in back] == [a.key() for a in archs]
    assert bool(decoder.is_valid(data.graphs).all())


def test_graphs_that_are_no_architecture_decode_to_none(space):
    arch = space.sample(random.Random(1))
    data = space_dataset(space, [arch])
    adj, types = data.graphs.graphs()[0]
    cut = np.array(adj, copy=True)
    cut[0, 1] = 0  # the first connection loses its source layer
    chain = np.triu(np.ones((len(types), len(types)), dtype=np.int64), 1)  # every vertex feeds every later one
    broken = DagBatch.from_graphs([(cut, types), (chain, types), (adj, types)], max_nodes=data.max_nodes)
    decoder = SpaceDecoder(space, data.vocab)
    assert decoder.archs(broken)[:2] == [None, None]
    assert decoder.is_valid(broken).tolist() == [False, False, True]


def test_a_space_without_a_vocabulary_is_refused():
    class NoVocabulary:
        name = "no-vocabulary"

    with pytest.raises(ConfigError, match="no-vocabulary.*dag_vocabulary"):
        space_vocabulary(NoVocabulary())
