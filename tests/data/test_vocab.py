"""Vocabulary building and fixed-length encoding."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.data.sst import normalize_ptb_token
from attnas.data.vocab import PAD_ID, UNK_ID, Vocab, lengths_to_mask

DOCS = [["The", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "-LRB-"]]


def test_build_orders_by_frequency_then_alphabet():
    v = Vocab.build(DOCS)
    assert v.itos[:2] == ["<pad>", "<unk>"]
    assert v.itos[2:] == ["cat", "sat", "the", "-lrb-", "a", "dog"]
    assert v.build(DOCS, min_freq=2).itos[2:] == ["cat", "sat", "the"]


def test_normaliser_and_extra_words():
    v = Vocab.build(DOCS, normalize_ptb_token, extra_words=["Bird", "cat"])
    assert "(" in v.stoi and "-LRB-" in v and "bird" in v.stoi
    assert v.itos.count("cat") == 1 and v.itos[-1] == "bird"


def test_encode_unknown_and_many():
    v = Vocab.build(DOCS)
    assert v.encode(["THE", "zebra"]) == [v.stoi["the"], UNK_ID]
    enc = v.encode_many([["cat"] * 5, ["dog", "sat"]], max_len=3)
    assert enc.ids.shape == (2, 3) and enc.ids.dtype == torch.long
    assert enc.lengths.tolist() == [3, 2]  # truncated to max_len
    assert enc.ids[1].tolist() == [v.stoi["dog"], v.stoi["sat"], PAD_ID]
    mask = lengths_to_mask(enc.lengths, 3)
    assert mask.tolist() == [[True, True, True], [True, True, False]]
    assert torch.all(enc.ids[~mask] == PAD_ID)


def test_coverage():
    v = Vocab.build(DOCS[:1])
    assert v.coverage([["the", "cat", "zebra", "yak"]]) == 0.5


def test_errors():
    with pytest.raises(ConfigError, match="min_freq"):
        Vocab.build(DOCS, min_freq=0)
    with pytest.raises(ConfigError, match="no tokens"):
        Vocab.build(DOCS).encode_many([["cat"], []], 4)
    with pytest.raises(ConfigError, match="distinct"):
        Vocab(["a", "a"])
