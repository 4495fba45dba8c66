"""A user's own text-classification data from a CSV or TSV file.

One file with a text column and a label column (names configurable), optionally a
split column (``train`` / ``val`` / ``test``; ``dev``, ``valid`` and ``validation`` mean
``val``), or separate validation and test files. Any held-out split that is not given
is carved out of the training rows: stratified by label and seeded, so the same file
and seed always give the same split.

Labels may be strings (mapped to ids in sorted order, or in the order of ``labels``
when a label set is given; the mapping is kept as the dataset's ``label_names``) or
non-negative integers (used as ids). Rows are validated: an empty text or label, a
label outside the given label set, a missing column or an unknown split value is
reported with the file and line number.

Text is tokenised with a small PTB-like tokeniser (words, numbers, clitics such as
``n't`` and ``'s``, and punctuation as separate tokens), lowercased by default.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from attnas.config import CheckedConfig, Fraction, Seed
from attnas.core.errors import ConfigError, DataError
from attnas.core.text_files import read_text
from attnas.data.root import resolve_data_root
from attnas.data.text_dataset import TEXT_SPLITS, TextDataset, TextSplit, lowercase
from attnas.registry import register_dataset

SPLIT_ALIASES = {"train": "train", "training": "train", "val": "val", "dev": "val", "valid": "val",
                 "validation": "val", "test": "test", "testing": "test"}
_TOKEN = re.compile(r"\w+(?=n't\b)|n't\b|'\w+|\w+(?:[-.]\w+)*|[^\w\s]")
_INT = re.compile(r"^\d+$")


def tokenize(text: str, lower: bool = True) -> list[str]:
    """Split ``text`` into word, number, clitic and punctuation tokens.

    >>> tokenize("It isn't a well-made film, is it?")
    ['it', 'is', "n't", 'a', 'well-made', 'film', ',', 'is', 'it', '?']
    """
    return _TOKEN.findall(text.lower() if lower else text)


@dataclass(frozen=True)
class CsvConfig(CheckedConfig):
    """Where a user's text data is and how to read it.

    Attributes:
        path: The CSV/TSV file (all rows, or the training rows when ``val_path`` /
            ``test_path`` are given). A relative path is looked up in the working
            directory, then under the data root.
        val_path: Optional file of validation rows (same columns).
        test_path: Optional file of test rows (same columns).
        text_column: Name of the text column.
        label_column: Name of the label column.
        split_column: Optional column assigning each row to train/val/test.
        labels: The label set (its order gives the ids); other labels are errors.
            Integers are compared as text (``[0, 1]`` matches cells ``0`` and ``1``).
        delimiter: ``auto`` (tab for ``.tsv``/``.tab`` files, else comma), ``,``, ``\\t`` or ``;``.
        val_fraction: Share of the training rows held out for validation when none is given.
        test_fraction: Share held out for testing when none is given.
        split_seed: Seed of the held-out split.
        lowercase: Lowercase the text.
    """

    path: str = ""
    val_path: str = ""
    test_path: str = ""
    text_column: str = "text"
    label_column: str = "label"
    split_column: str = ""
    labels: tuple[str | int, ...] = ()
    delimiter: Literal["auto", ",", "\t", ";"] = "auto"
    val_fraction: Fraction = 0.1
    test_fraction: Fraction = 0.1
    split_seed: Seed = 0
    lowercase: bool = True

    field_prefix = "csv."

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(str(label) for label in self.labels))
        super().__post_init__()
        if self.val_fraction + self.test_fraction >= 1.0:
            raise ConfigError("csv.val_fraction + csv.test_fraction must be below 1")
        if len(set(self.labels)) != len(self.labels):
            raise ConfigError(f"csv.labels: duplicate labels in {list(self.labels)}")
        if self.split_column and (self.val_path or self.test_path):
            raise ConfigError("csv: give either split_column or val_path/test_path, not both")


#: The former name of :class:`CsvConfig`, still importable.
CsvOptions = CsvConfig


def _resolve(path: str, root: Path | None) -> Path:
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists() or root is None:
        return p
    return root / p


def _read_rows(path: Path, opts: CsvConfig) -> list[tuple[int, str, str, str]]:
    """``(line, text, label, split)`` for every data row of ``path``."""
    if not path.is_file():
        raise DataError(f"csv: file {path} does not exist")
    delimiter = opts.delimiter
    if delimiter == "auto":
        delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    text = read_text(path, f"csv {path}", DataError)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        return _parse_rows(path, reader, delimiter, opts)
    except csv.Error as exc:
        hint = "; a cell this long is refused (split or shorten its text)" if "field larger" in str(exc) else ""
        raise DataError(f"csv {path}, line {reader.line_num}: {exc}{hint}") from None


def _parse_rows(path: Path, reader: Any, delimiter: str, opts: CsvConfig) -> list[tuple[int, str, str, str]]:
    """The rows of ``reader`` (see :func:`_read_rows`)."""
    header = next(reader, None)
    if header is None:
        raise DataError(f"csv {path}: the file is empty (expected a header row)")
    header = [h.strip() for h in header]
    wanted = [opts.text_column, opts.label_column] + ([opts.split_column] if opts.split_column else [])
    for col in wanted:
        if col not in header:
            sep = "tab" if delimiter == "\t" else repr(delimiter)
            raise DataError(
                f"csv {path}: no column '{col}' (columns found: {', '.join(header) or 'none'}; "
                f"delimiter {sep}); set task.csv.text_column / label_column"
            )
    ti, li = header.index(opts.text_column), header.index(opts.label_column)
    si = header.index(opts.split_column) if opts.split_column else None
    rows = []
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue  # blank line
        line = reader.line_num
        if len(row) < len(header):
            raise DataError(f"csv {path}, line {line}: {len(row)} fields, the header has {len(header)}")
        text, label = row[ti].strip(), row[li].strip()
        if not text:
            raise DataError(f"csv {path}, line {line}: empty text in column '{opts.text_column}'")
        if not label:
            raise DataError(f"csv {path}, line {line}: empty label in column '{opts.label_column}'")
        split = ""
        if si is not None:
            raw = row[si].strip().lower()
            if raw not in SPLIT_ALIASES:
                raise DataError(
                    f"csv {path}, line {line}: split '{row[si]}' in column '{opts.split_column}' "
                    f"is not one of train, val (dev, valid), test"
                )
            split = SPLIT_ALIASES[raw]
        rows.append((line, text, label, split))
    if not rows:
        raise DataError(f"csv {path}: no data rows under the header")
    return rows


def _label_map(rows: list[tuple[Path, int, str, str, str]], opts: CsvConfig) -> tuple[dict[str, int], tuple[str, ...]]:
    if opts.labels:
        known = {lab: i for i, lab in enumerate(opts.labels)}
        for path, line, _, label, _ in rows:
            if label not in known:
                raise DataError(
                    f"csv {path}, line {line}: unknown label '{label}' (expected one of: {', '.join(opts.labels)})"
                )
        return known, tuple(opts.labels)
    values = sorted({r[3] for r in rows})
    if all(_INT.match(v) for v in values):
        k = max(int(v) for v in values) + 1
        return {v: int(v) for v in values}, tuple(str(i) for i in range(k))
    return {v: i for i, v in enumerate(values)}, tuple(values)


def stratified_holdout(labels: list[int], fractions: dict[str, float], seed: int) -> dict[str, list[int]]:
    """Split example indices into ``train`` plus held-out parts, per label, seeded.

    Each label's examples are shuffled and ``round(fraction * count)`` of them go to
    each held-out split (at least one of a label with two or more examples when the
    fraction is positive, never all of them).

    Args:
        labels: The label of each example.
        fractions: ``{"val": 0.1, "test": 0.1}`` (only the splits to carve out).
        seed: Seed of the shuffle.

    Returns:
        ``{"train": [...], "val": [...], ...}``, each sorted.
    """
    rng = np.random.default_rng(seed)
    out: dict[str, list[int]] = {"train": [], **{s: [] for s in fractions}}
    y = np.asarray(labels)
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        start = 0
        for split, frac in fractions.items():
            take = int(round(frac * len(idx)))
            if frac > 0 and take == 0 and len(idx) - start >= 2:
                take = 1
            take = min(take, len(idx) - start - 1)  # keep at least one for training
            out[split].extend(idx[start : start + max(take, 0)].tolist())
            start += max(take, 0)
        out["train"].extend(idx[start:].tolist())
    return {k: sorted(v) for k, v in out.items()}


@register_dataset("csv", modality="text", options=("csv",))
def load_text_csv(root: str | os.PathLike | None = None, *, csv: CsvConfig | None = None) -> TextDataset:
    """A user's CSV/TSV text-classification file(s), validated (see :class:`CsvConfig`)."""
    opts = csv or CsvConfig()
    if not opts.path:
        raise ConfigError("csv: set task.csv.path to your CSV or TSV file")
    data_root = resolve_data_root(root)
    files = {"train": opts.path, "val": opts.val_path, "test": opts.test_path}
    rows: list[tuple[Path, int, str, str, str]] = []
    for split, name in files.items():
        if not name:
            continue
        path = _resolve(name, data_root)
        for line, text, label, col_split in _read_rows(path, opts):
            rows.append((path, line, text, label, col_split or split))
    label_ids, label_names = _label_map(rows, opts)

    by_split: dict[str, list[tuple[list[str], int, str]]] = {s: [] for s in TEXT_SPLITS}
    for path, line, text, label, split in rows:
        tokens = tokenize(text, opts.lowercase)
        if not tokens:
            raise DataError(f"csv {path}, line {line}: the text has no tokens")
        by_split[split].append((tokens, label_ids[label], text))
    if not by_split["train"]:
        raise DataError(f"csv {opts.path}: no training rows")
    carve = {s: getattr(opts, f"{s}_fraction") for s in ("val", "test") if not by_split[s]}
    if carve:
        zero = [s for s, f in carve.items() if f == 0]
        if zero:
            raise ConfigError(f"csv: no {' or '.join(zero)} rows given and {zero[0]}_fraction is 0")
        train = by_split["train"]
        labels = [y for _, y, _ in train]
        parts = stratified_holdout(labels, carve, opts.split_seed)
        empty = [split for split in carve if not parts[split]]
        if empty:
            counts = np.bincount(labels)
            raise DataError(f"csv {opts.path}: no {empty[0]} rows can be held out of the training rows: "
                            f"{int((counts == 1).sum())} of {int((counts > 0).sum())} labels occur in one row only "
                            f"(a label gives held-out rows from its second row on); give task.csv.{empty[0]}_path "
                            "or more rows per label")
        for split, idx in parts.items():
            by_split[split] = [train[i] for i in idx]
    splits = {s: TextSplit([t for t, _, _ in ex], [y for _, y, _ in ex], [x for _, _, x in ex])
              for s, ex in by_split.items()}
    return TextDataset(
        name="csv",
        splits=splits,
        label_names=label_names,
        normalize=lowercase if opts.lowercase else str,
        meta={"files": {k: v for k, v in files.items() if v}, "held_out": sorted(carve), "split_seed": opts.split_seed},
    )
