"""The in-memory token-sequence container and right-padding."""

import pytest
import torch

from attnas.core.errors import DataError
from attnas.data.token_sequences import TokenSequences, pad_sequences


def test_pad_sequences_right_pads_with_the_pad_id():
    tokens, lengths = pad_sequences([[5, 6, 7], [8]], pad_id=0)
    assert tokens.tolist() == [[5, 6, 7], [8, 0, 0]] and lengths.tolist() == [3, 1]
    with pytest.raises(DataError, match="no tokens"):
        pad_sequences([[1], []])


def test_container_checks_splits():
    splits = {"train": ([[1]], [0]), "val": ([[1]], [0]), "test": ([[1]], [0])}
    data = TokenSequences("toy", ("<pad>", "a"), 2, splits, max_len=4)
    assert data.vocab_size == 2 and data.size("val") == 1
    with pytest.raises(DataError, match="split 'test' is missing"):
        TokenSequences("toy", ("<pad>", "a"), 2, {k: v for k, v in splits.items() if k != "test"}, max_len=4)
    with pytest.raises(DataError, match="1 sequences but 2 labels"):
        TokenSequences("toy", ("<pad>", "a"), 2, {**splits, "val": ([[1]], [0, 1])}, max_len=4)
    assert torch.is_tensor(pad_sequences(splits["train"][0])[0])
