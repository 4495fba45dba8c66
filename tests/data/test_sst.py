"""SST loaders on the real PTB trees: exact sizes and label counts from SOURCES.md."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from attnas import registry
from attnas.core.errors import DataError
from attnas.data.sst import load_sst2, load_sst5, normalize_ptb_token, parse_tree

SST5 = {"train": (8544, [1092, 2218, 1624, 2322, 1288]),
        "val": (1101, [139, 289, 229, 279, 165]),
        "test": (2210, [279, 633, 389, 510, 399])}
SST2 = {"train": (6920, [3310, 3610]), "val": (872, [428, 444]), "test": (1821, [912, 909])}


def node_labels(path):
    """Reference: every node label of a tree file, read with a plain regex."""
    return [int(m) for m in re.findall(r"\((\d)", path.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("loader,expected,k", [(load_sst5, SST5, 5), (load_sst2, SST2, 2)])
def test_split_sizes_and_label_counts(data_root, loader, expected, k):
    data = loader(data_root)
    assert data.num_classes == k
    for split, (n, counts) in expected.items():
        assert len(data[split]) == n
        assert data[split].label_counts(k) == counts


def test_tokens_as_in_trees_and_normaliser(data_root):
    data = load_sst5(data_root)
    assert data["train"].tokens[0][:4] == ["The", "Rock", "is", "destined"]
    tokens = {t for s in ("train", "val", "test") for ex in data[s].tokens for t in ex}
    assert "-LRB-" in tokens and "\\/" in "".join(tokens)
    # SOURCES.md: 21,699 distinct tokens, 19,536 after lowercasing and undoing PTB escapes
    assert len(tokens) == 21699
    assert len({normalize_ptb_token(t) for t in tokens}) == 19536


def test_normalize_ptb_token():
    assert [normalize_ptb_token(t) for t in ["-LRB-", "-RRB-", "-lsb-", "1\\/2", "\\*", "The"]] == \
        ["(", ")", "[", "1/2", "*", "the"]


def test_phrases_sst5_match_reference_count(data_root):
    train_file = data_root / "sst" / "train.txt"
    all_nodes = node_labels(train_file)
    assert len(all_nodes) == 318582  # SOURCES.md: labelled nodes of the train trees
    kept = load_sst5(data_root, phrases=True, dedupe_phrases=False)
    assert len(kept["train"]) == len(all_nodes)
    assert Counter(kept["train"].labels) == Counter(all_nodes)

    deduped = load_sst5(data_root, phrases=True)
    pairs = list(zip(map(tuple, deduped["train"].tokens), deduped["train"].labels))
    distinct = set(pairs)
    assert len(pairs) == len(distinct)  # no duplicates left
    assert distinct == set(zip(map(tuple, kept["train"].tokens), kept["train"].labels))  # nothing lost
    # the full sentences are among the phrases; val/test stay sentences
    sentences = load_sst5(data_root)["train"]
    assert set(zip(map(tuple, sentences.tokens), sentences.labels)) <= distinct
    assert len(deduped["val"]) == 1101 and len(deduped["test"]) == 2210


def test_phrases_sst2_drop_neutral(data_root):
    all_nodes = node_labels(data_root / "sst" / "train.txt")
    kept = load_sst2(data_root, phrases=True, dedupe_phrases=False)
    assert len(kept["train"]) == sum(y != 2 for y in all_nodes)
    assert Counter(kept["train"].labels) == {0: sum(y <= 1 for y in all_nodes), 1: sum(y >= 3 for y in all_nodes)}


def test_parse_tree_spans():
    tokens, nodes = parse_tree("(3 (2 The) (4 (3 good) (2 film)))")
    assert tokens == ["The", "good", "film"]
    assert nodes == [(2, 0, 1), (3, 1, 2), (2, 2, 3), (4, 1, 3), (3, 0, 3)]


@pytest.mark.parametrize("bad,msg", [("(3 (2 The) (4 good)", "unbalanced"), ("(x (2 The))", "numeric label"),
                                     ("(3 (2 The)))", "after the end"), ("(3 )", "no tokens")])
def test_malformed_trees_name_file_and_line(tmp_path, bad, msg):
    folder = tmp_path / "sst"
    folder.mkdir()
    good = "(3 (2 The) (4 good))\n"
    (folder / "train.txt").write_text(good + bad + "\n")
    (folder / "dev.txt").write_text(good)
    (folder / "test.txt").write_text(good)
    with pytest.raises(DataError, match=rf"train.txt:2: .*{msg}"):
        load_sst5(tmp_path)


def test_label_outside_range(tmp_path):
    folder = tmp_path / "sst"
    folder.mkdir()
    for name in ("train.txt", "dev.txt", "test.txt"):
        (folder / name).write_text("(7 (2 a) (2 b))\n")
    with pytest.raises(DataError, match="outside 0..4"):
        load_sst2(tmp_path)


def test_missing_files_are_named(tmp_path):
    (tmp_path / "sst").mkdir()
    (tmp_path / "sst" / "train.txt").write_text("(2 (2 a) (2 b))\n")
    with pytest.raises(DataError, match=r"sst5: missing dev.txt, test.txt in .*sst"):
        load_sst5(tmp_path)


def test_registered_as_text_datasets():
    for name, fn in (("sst5", load_sst5), ("sst2", load_sst2)):
        entry = registry.get_entry("dataset", name)
        assert entry.obj is fn and entry.extra["modality"] == "text"
