"""MQAR generation (Arora et al. 2023, "Zoology"): determinism, recoverable answers, the power law, bad options."""

from __future__ import annotations

import numpy as np
import pytest

from attnas.config import from_mapping
from attnas.core.errors import ConfigError
from attnas.data.mqar import IGNORE, MQARConfig, generate_mqar, slot_probabilities

SMALL = MQARConfig(vocab_size=32, seq_len=40, num_pairs=5, train_size=200, val_size=50, test_size=50, seed=3)


def test_the_same_seed_gives_the_same_data_and_splits_and_seeds_differ():
    a_tok, a_lab = generate_mqar(SMALL, "train")
    b_tok, b_lab = generate_mqar(SMALL, "train")
    assert np.array_equal(a_tok, b_tok) and np.array_equal(a_lab, b_lab)
    assert a_tok.shape == a_lab.shape == (200, 40) and a_tok.dtype == np.int64
    val_tok, _ = generate_mqar(SMALL, "val")
    other, _ = generate_mqar(MQARConfig(**{**SMALL.__dict__, "seed": 4}), "train")
    assert not np.array_equal(a_tok[:50], val_tok) and not np.array_equal(a_tok, other)


def test_every_query_answer_is_the_value_after_its_key_in_the_context():
    tokens, labels = generate_mqar(SMALL, "train")
    p, half = SMALL.num_pairs, SMALL.vocab_size // 2
    for row, lab in zip(tokens, labels):
        keys, values = row[0 : 2 * p : 2], row[1 : 2 * p : 2]
        assert len(set(keys)) == p and all(1 <= k < half for k in keys)
        assert len(set(values)) == p and all(half <= v < SMALL.vocab_size for v in values)
        lookup = dict(zip(keys.tolist(), values.tolist()))
        queried = np.flatnonzero(lab != IGNORE)
        assert len(queried) == p and (queried >= 2 * p).all() and ((queried - 2 * p) % 2 == 0).all()
        # each key is queried once, and the label is the value that followed it in the context
        assert sorted(row[queried].tolist()) == sorted(keys.tolist())
        assert [lookup[k] for k in row[queried].tolist()] == lab[queried].tolist()
    assert (tokens >= 1).all()  # token 0 is reserved for padding


def test_filler_instead_of_random_non_queries():
    config = MQARConfig(**{**SMALL.__dict__, "random_non_queries": False})
    tokens, labels = generate_mqar(config, "val")
    rest = tokens[:, 2 * config.num_pairs :][labels[:, 2 * config.num_pairs :] == IGNORE]
    assert (rest == 0).all()


def test_queries_follow_the_power_law_soon_after_the_context():
    p = slot_probabilities(10, 0.01)
    assert np.isclose(p.sum(), 1.0) and (np.diff(p) < 0).all()
    tokens, labels = generate_mqar(MQARConfig(vocab_size=64, seq_len=128, num_pairs=4, train_size=400), "train")
    slots = (np.argwhere(labels != IGNORE)[:, 1] - 8) // 2
    assert np.median(slots) < (128 - 8) // 4  # most queries in the first half of the query region


@pytest.mark.parametrize(("options", "message"), [
    ({"num_pairs": 20, "seq_len": 64}, "seq_len: 64 is too short for num_pairs=20"),
    ({"vocab_size": 8}, "vocab_size: 8 leaves 3 keys for num_pairs=4"),
    ({"power_a": 0}, "power_a: must be in"),
    ({"power_a": "steep"}, "power_a"),
    ({"num_pairs": 0}, "num_pairs"),
    ({"pairs": 4}, "unknown key"),
])
def test_bad_options_are_one_line_errors(options, message):
    with pytest.raises(ConfigError, match=message) as err:
        from_mapping(MQARConfig, options, "task")
    assert "\n" not in str(err.value)
