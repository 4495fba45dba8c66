"""Byte- and word-level token sequences of text datasets (SST, a user's CSV)."""

from __future__ import annotations

import pytest

from attnas.data.text_sequences import (BYTE_VOCAB, TextSequencesConfig, detokenize, encode_bytes,
                                        load_text_sequences)
from attnas.core.errors import ConfigError
from attnas.data.text_csv import CsvOptions


def write_csv(path, n=30):
    rows = ["text,label"] + [f"\"Caf\u00e9 n\u00b0{i}, isn't it?\",{'pos' if i % 2 else 'neg'}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_bytes_of_a_csv_are_the_raw_utf8_text(tmp_path):
    write_csv(tmp_path / "d.csv")
    opts = TextSequencesConfig(level="bytes", max_len=12, csv=CsvOptions(path="d.csv"))
    data = load_text_sequences("csv", opts, tmp_path)
    assert data.vocab == BYTE_VOCAB and data.vocab_size == 257 and data.pad_id == 0
    assert data.max_len == 12 and data.num_classes == 2 and data.name == "csv-bytes"
    seqs, labels = data.splits["train"]
    assert sum(data.size(s) for s in ("train", "val", "test")) == 30
    # raw text (case, no tokeniser spaces), UTF-8 bytes shifted by one, truncated to 12 bytes
    text = bytes(b - 1 for b in seqs[0]).decode("utf-8")
    assert text.startswith("Caf\u00e9 n\u00b0") and len(seqs[0]) == 12
    assert all(len(s) <= 12 for s in seqs)


def test_words_use_a_training_vocabulary(tmp_path):
    write_csv(tmp_path / "d.csv")
    opts = TextSequencesConfig(level="words", max_len=3, csv=CsvOptions(path="d.csv"))
    data = load_text_sequences("csv", opts, tmp_path)
    assert data.vocab[:2] == ("<pad>", "<unk>") and "café" in data.vocab and "n't" in data.vocab
    seqs, _ = data.splits["test"]
    assert all(1 <= len(s) <= 3 for s in seqs)
    assert seqs[0][0] == data.vocab.index("café")


def test_training_subset_is_seeded_and_leaves_evaluation_splits(tmp_path):
    write_csv(tmp_path / "d.csv", n=60)
    base = CsvOptions(path="d.csv")
    full = load_text_sequences("csv", TextSequencesConfig(csv=base), tmp_path)
    a = load_text_sequences("csv", TextSequencesConfig(csv=base, train_size=10), tmp_path)
    b = load_text_sequences("csv", TextSequencesConfig(csv=base, train_size=10), tmp_path)
    c = load_text_sequences("csv", TextSequencesConfig(csv=base, train_size=10, subset_seed=1), tmp_path)
    assert a.size("train") == 10 and a.splits["train"] == b.splits["train"] != c.splits["train"]
    assert a.splits["val"] == full.splits["val"] and a.splits["test"] == full.splits["test"]
    assert all(s in full.splits["train"][0] for s in a.splits["train"][0])


def test_helpers():
    assert detokenize(["-LRB-", "a", "\\/", "b", "-RRB-"]) == "( a / b )"
    assert encode_bytes("ab\u00e9", 10) == [98, 99, 0xC3 + 1, 0xA9 + 1]
    assert encode_bytes("abc", 2) == [98, 99]


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="text dataset 'sst3'"):
        load_text_sequences("sst3", TextSequencesConfig(), tmp_path)
    with pytest.raises(ConfigError, match="text.max_len"):
        TextSequencesConfig(max_len=0)
    with pytest.raises(ConfigError, match="text.train_size"):
        TextSequencesConfig(train_size=-1)


def test_sst2_bytes(data_root):
    data = load_text_sequences("sst2", TextSequencesConfig(level="bytes", max_len=4000), data_root)
    assert [data.size(s) for s in ("train", "val", "test")] == [6920, 872, 1821]
    first = bytes(b - 1 for b in data.splits["train"][0][0]).decode()
    assert first.startswith("The Rock is destined to be the 21st Century 's new")
    assert data.meta["longest"] < 300
