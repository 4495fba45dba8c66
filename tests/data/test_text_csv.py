"""A user's CSV/TSV text data: labels, held-out splits, and the validation messages."""

from __future__ import annotations

from collections import Counter

import pytest

from attnas import registry
from attnas.config import from_mapping
from attnas.core.errors import ConfigError, DataError
from attnas.data.text_csv import CsvOptions, load_text_csv, stratified_holdout, tokenize


def write(path, rows, sep=","):
    path.write_text("\n".join(sep.join(r) for r in rows) + "\n", encoding="utf-8")
    return path


def sample_rows(n_per_class=20, labels=("neg", "pos", "meh")):
    rows = [["text", "label"]]
    for i in range(n_per_class):
        for lab in labels:
            rows.append([f"review {i} was {lab}", lab])
    return rows


def load(tmp_path, **kw):
    return load_text_csv(tmp_path, csv=CsvOptions(**kw))


def test_string_labels_and_stratified_holdout(tmp_path):
    write(tmp_path / "d.csv", sample_rows())
    data = load(tmp_path, path="d.csv")
    assert data.label_names == ("meh", "neg", "pos")  # sorted mapping, kept
    sizes = {s: len(data[s]) for s in ("train", "val", "test")}
    assert sizes == {"train": 48, "val": 6, "test": 6}
    for split in ("val", "test"):  # stratified: 2 of each class
        assert data[split].label_counts(3) == [2, 2, 2]
    assert data["train"].tokens[0][0] == "review"
    # seeded: the same seed gives the same split, another seed another one
    again = load(tmp_path, path="d.csv")
    other = load(tmp_path, path="d.csv", split_seed=1)
    assert again["val"].tokens == data["val"].tokens
    assert other["val"].tokens != data["val"].tokens


def test_tsv_integer_labels(tmp_path):
    rows = [["sentence", "y"]] + [[f"text number {i}", str(i % 3)] for i in range(30)]
    write(tmp_path / "d.tsv", rows, sep="\t")
    data = load(tmp_path, path=str(tmp_path / "d.tsv"), text_column="sentence", label_column="y",
                val_fraction=0.2, test_fraction=0.2)
    assert data.label_names == ("0", "1", "2")
    assert sum(len(data[s]) for s in ("train", "val", "test")) == 30
    assert data["val"].label_counts(3) == [2, 2, 2]


def test_label_set_orders_ids_and_rejects_unknown(tmp_path):
    write(tmp_path / "d.csv", sample_rows(labels=("neg", "pos")))
    data = load(tmp_path, path="d.csv", labels=("pos", "neg", "neutral"))
    assert data.label_names == ("pos", "neg", "neutral")
    assert Counter(data["train"].labels + data["val"].labels + data["test"].labels) == {0: 20, 1: 20}
    rows = sample_rows(labels=("neg", "pos"))
    rows[5][1] = "great"
    write(tmp_path / "bad.csv", rows)
    with pytest.raises(DataError, match=r"bad\.csv, line 6: unknown label 'great' \(expected one of: neg, pos\)"):
        load(tmp_path, path="bad.csv", labels=("neg", "pos"))


def test_empty_text_names_the_line(tmp_path):
    rows = sample_rows()
    rows[3][0] = "  "
    write(tmp_path / "d.csv", rows)
    with pytest.raises(DataError, match=r"d\.csv, line 4: empty text in column 'text'"):
        load(tmp_path, path="d.csv")
    rows = sample_rows()
    rows[2][1] = ""
    write(tmp_path / "e.csv", rows)
    with pytest.raises(DataError, match=r"line 3: empty label"):
        load(tmp_path, path="e.csv")


def test_missing_column_lists_the_columns_found(tmp_path):
    write(tmp_path / "d.csv", [["review", "stars"], ["good", "5"]])
    with pytest.raises(DataError, match=r"no column 'text' \(columns found: review, stars; delimiter ','\)"):
        load(tmp_path, path="d.csv")
    with pytest.raises(DataError, match="no column 'sentiment'"):
        load(tmp_path, path="d.csv", text_column="review", label_column="sentiment")


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load(tmp_path, path="nope.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataError, match="the file is empty"):
        load(tmp_path, path="empty.csv")
    write(tmp_path / "header.csv", [["text", "label"]])
    with pytest.raises(DataError, match="no data rows"):
        load(tmp_path, path="header.csv")
    with pytest.raises(ConfigError, match="task.csv.path"):
        load(tmp_path)


def test_split_column_with_aliases(tmp_path):
    rows = [["text", "label", "part"]]
    for i in range(12):
        rows.append([f"t{i} words", "ab"[i % 2], ["train", "train", "dev", "test"][i % 4]])
    write(tmp_path / "d.csv", rows)
    data = load(tmp_path, path="d.csv", split_column="part")
    assert [len(data[s]) for s in ("train", "val", "test")] == [6, 3, 3]
    assert data.meta["held_out"] == []
    rows[4][2] = "holdout"
    write(tmp_path / "bad.csv", rows)
    with pytest.raises(DataError, match=r"line 5: split 'holdout' in column 'part'"):
        load(tmp_path, path="bad.csv", split_column="part")


def test_separate_files_carve_only_what_is_missing(tmp_path):
    write(tmp_path / "train.csv", sample_rows(10, ("a", "b")))
    write(tmp_path / "test.csv", sample_rows(3, ("a", "b")))
    data = load(tmp_path, path="train.csv", test_path="test.csv", val_fraction=0.2)
    assert len(data["test"]) == 6 and len(data["val"]) == 4 and len(data["train"]) == 16
    assert data.meta["held_out"] == ["val"]


def test_stratified_holdout_keeps_a_training_example_per_class():
    parts = stratified_holdout([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], {"val": 0.1, "test": 0.1}, seed=0)
    assert sorted(parts["train"] + parts["val"] + parts["test"]) == list(range(11))
    assert 10 in parts["train"]  # a singleton class stays in training
    assert len(parts["val"]) == 1 and len(parts["test"]) == 1


def test_options_validated():
    with pytest.raises(ConfigError, match="val_fraction"):
        CsvOptions(val_fraction=1.5)
    with pytest.raises(ConfigError, match="below 1"):
        CsvOptions(val_fraction=0.5, test_fraction=0.5)
    with pytest.raises(ConfigError, match="either split_column"):
        CsvOptions(split_column="s", val_path="v.csv")
    assert from_mapping(CsvOptions, {"labels": [1, "0"]}, "csv").labels == ("1", "0")
    with pytest.raises(ConfigError, match=r"csv.delimiter: '\|' is not a valid choice"):
        from_mapping(CsvOptions, {"delimiter": "|"}, "csv")


def test_tokenizer():
    assert tokenize("Don't stop: it's GREAT!") == ["do", "n't", "stop", ":", "it", "'s", "great", "!"]
    assert tokenize("Keep Case", lower=False) == ["Keep", "Case"]


def test_registered():
    entry = registry.get_entry("dataset", "csv")
    assert entry.obj is load_text_csv and entry.extra["modality"] == "text"
