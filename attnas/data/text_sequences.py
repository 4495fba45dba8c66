"""Byte-level and word-level token sequences of a text-classification dataset.

The Long Range Arena text task (Tay et al. 2021, Sec. 3.2) classifies documents read as
raw bytes (IMDb, up to 4,000 bytes) to make sequences long; DARTFormer (Brown et al.
2022, Sec. 3.2) searches attention mechanisms on it. This module turns any registered
text dataset (``sst2``, ``sst5``, ``csv``; see :mod:`attnas.data.text_dataset`) into a
:class:`~attnas.data.token_sequences.TokenSequences` for
:class:`~attnas.tasks.sequence_classification.SequenceClassificationTask`:

- ``level="bytes"``: the UTF-8 bytes of the text, byte ``b`` -> id ``b + 1`` (id 0 is
  padding), truncated to ``max_len``. The text is the raw text where the loader keeps it
  (CSV), else the tokens joined by spaces with PTB escapes undone (SST's trees are
  tokenised text: ``-LRB-`` -> ``(``).
- ``level="words"``: the words of a vocabulary built from the training split
  (:class:`~attnas.data.vocab.Vocab`: padding 0, unknown 1, words seen ``min_freq`` times),
  truncated to ``max_len``.

``train_size`` keeps a seeded random subset of the training split (for CPU-scale runs);
validation and test are never subsampled. A user with IMDb runs the LRA text task through
the ``csv`` dataset (``task.text.csv.path``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from attnas import registry
from attnas.config import CheckedConfig, NonNegativeInt, PositiveInt, Seed
from attnas.core.errors import ConfigError, DataError, unknown_name
from attnas.data.text_csv import CsvConfig
from attnas.data.text_dataset import TEXT_SPLITS, TextDataset, TextSplit
from attnas.data.token_sequences import TokenSequences
from attnas.data.vocab import Vocab

PAD = "<pad>"
BYTE_VOCAB = (PAD, *(f"<0x{b:02X}>" for b in range(256)))
PTB_UNESCAPE = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}


@dataclass(frozen=True)
class TextSequencesConfig(CheckedConfig):
    """How a text dataset becomes token sequences.

    Attributes:
        level: ``bytes`` (LRA's byte-level text task) or ``words``.
        max_len: Sequences are truncated to this many tokens (LRA text: 4,000 bytes).
        min_freq: Words: minimum training count of a vocabulary word.
        phrases: SST: train on every labelled phrase of the training trees.
        train_size: Keep this many training examples, drawn with ``subset_seed`` (0: all).
        subset_seed: Seed of the training subset.
        csv: Where and how to read a CSV dataset (``dataset: csv``).
    """

    level: Literal["bytes", "words"] = "bytes"
    max_len: PositiveInt = 4000
    min_freq: PositiveInt = 1
    phrases: bool = False
    train_size: NonNegativeInt = 0
    subset_seed: Seed = 0
    csv: CsvConfig = field(default_factory=CsvConfig)

    field_prefix = "text."


def text_dataset_names() -> list[str]:
    """Registered text datasets (``sst2``, ``sst5``, ``csv``, ...)."""
    return registry.names("dataset", modality="text")


def detokenize(tokens: list[str]) -> str:
    """The text of a token list: joined by spaces, PTB bracket escapes undone.

    >>> detokenize(["-LRB-", "a", "\\\\/", "b", "-RRB-"])
    '( a / b )'
    """
    return " ".join(PTB_UNESCAPE.get(t, t.replace("\\/", "/").replace("\\*", "*")) for t in tokens)


def encode_bytes(text: str, max_len: int) -> list[int]:
    """UTF-8 byte ids (byte ``b`` -> ``b + 1``) of ``text``, at most ``max_len``."""
    return [b + 1 for b in text.encode("utf-8")[:max_len]]


def _subset(split: TextSplit, size: int, seed: int) -> TextSplit:
    if not size or size >= len(split):
        return split
    idx = sorted(random.Random(seed).sample(range(len(split)), size))
    texts = [split.texts[i] for i in idx] if split.texts is not None else None
    return TextSplit([split.tokens[i] for i in idx], [split.labels[i] for i in idx], texts)


def _texts(split: TextSplit) -> list[str]:
    return list(split.texts) if split.texts is not None else [detokenize(t) for t in split.tokens]


def load_text_sequences(dataset: str, options: TextSequencesConfig | None = None,
                        root: str | Path | None = None) -> TokenSequences:
    """A registered text dataset as byte- or word-level token sequences.

    Args:
        dataset: ``sst2``, ``sst5``, ``csv`` or another registered text dataset.
        options: Level, truncation, subset and CSV options.
        root: Data root (default: :func:`~attnas.data.root.resolve_data_root`).

    Returns:
        Token sequences named ``<dataset>-<level>``; ``max_len`` is ``options.max_len``.

    Raises:
        ConfigError: An unknown dataset.
        DataError: Missing or malformed files (from the dataset's loader).
    """
    opts = options or TextSequencesConfig()
    valid = text_dataset_names()
    if dataset not in valid:
        raise ConfigError("task.dataset: " + unknown_name("text dataset", dataset, valid))
    entry = registry.get_entry("dataset", dataset)
    kwargs = {k: getattr(opts, k) for k in entry.extra.get("options", ())}
    data: TextDataset = entry.obj(root, **kwargs)
    splits = {s: data[s] for s in TEXT_SPLITS}
    splits["train"] = _subset(splits["train"], opts.train_size, opts.subset_seed)
    if opts.level == "bytes":
        vocab = BYTE_VOCAB
        ids = {s: [encode_bytes(t, opts.max_len) for t in _texts(sp)] for s, sp in splits.items()}
    else:
        words = Vocab.build(splits["train"].tokens, data.normalize, opts.min_freq)
        vocab = tuple(words.itos)
        ids = {s: [words.encode(t)[: opts.max_len] for t in sp.tokens] for s, sp in splits.items()}
    for s, seqs in ids.items():
        empty = [i for i, seq in enumerate(seqs) if not seq]
        if empty:
            raise DataError(f"{dataset}: example {empty[0]} of the {s} split has no {opts.level}")
    lengths = [len(x) for seqs in ids.values() for x in seqs]
    return TokenSequences(
        name=f"{dataset}-{opts.level}",
        vocab=vocab,
        num_classes=data.num_classes,
        splits={s: (ids[s], list(splits[s].labels)) for s in TEXT_SPLITS},
        max_len=opts.max_len,
        pad_id=0,
        meta={"dataset": dataset, "level": opts.level, "label_names": data.label_names,
              "longest": max(lengths), "mean_length": sum(lengths) / len(lengths),
              "train_size": len(ids["train"]), **data.meta},
    )
