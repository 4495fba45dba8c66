"""The in-memory form every text-classification loader returns.

A loader (``sst5``, ``sst2``, ``csv``; registered with ``register_dataset(name,
modality="text", options=(...))``, where ``options`` names the task options the loader
takes as keyword arguments) reads its files and returns a :class:`TextDataset`: tokenised
examples with integer labels for the ``train``, ``val`` and ``test`` splits, the label
names, and the token normaliser that maps a token to its vocabulary / GloVe key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from attnas.core.errors import DataError

TEXT_SPLITS = ("train", "val", "test")


def lowercase(token: str) -> str:
    """The default normaliser: lowercase (GloVe 6B is uncased)."""
    return token.lower()


@dataclass
class TextSplit:
    """Tokenised examples of one split.

    Attributes:
        tokens: One list of tokens per example (never empty).
        labels: One class id per example, in ``[0, num_classes)``.
        texts: The raw text of each example where the loader keeps it (CSV), else None
            (byte-level models read it, :mod:`attnas.data.text_sequences`).
    """

    tokens: list[list[str]]
    labels: list[int]
    texts: list[str] | None = None

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.labels):
            raise DataError(f"{len(self.tokens)} examples but {len(self.labels)} labels")
        if self.texts is not None and len(self.texts) != len(self.labels):
            raise DataError(f"{len(self.texts)} texts but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.labels)

    def label_counts(self, num_classes: int) -> list[int]:
        """How many examples carry each label."""
        counts = Counter(self.labels)
        return [counts.get(c, 0) for c in range(num_classes)]


@dataclass
class TextDataset:
    """A text-classification dataset with train/val/test splits.

    Attributes:
        name: The registered dataset name.
        splits: ``{"train": ..., "val": ..., "test": ...}``.
        label_names: Class names; the class id is the index.
        normalize: Maps a token to its vocabulary key (and GloVe lookup key).
        meta: Facts about how it was read (files, options, counts).
    """

    name: str
    splits: dict[str, TextSplit]
    label_names: tuple[str, ...]
    normalize: Callable[[str], str] = lowercase
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [s for s in TEXT_SPLITS if s not in self.splits]
        if missing:
            raise DataError(f"{self.name}: missing split(s) {', '.join(missing)}")
        k = len(self.label_names)
        for split, data in self.splits.items():
            bad = [y for y in data.labels if not 0 <= y < k]
            if bad:
                raise DataError(f"{self.name}: {split} has label {bad[0]} outside [0, {k})")
            if len(data) == 0:
                raise DataError(f"{self.name}: the {split} split is empty")

    @property
    def num_classes(self) -> int:
        """Number of classes."""
        return len(self.label_names)

    def __getitem__(self, split: str) -> TextSplit:
        if split not in self.splits:
            raise DataError(f"{self.name}: unknown split '{split}'; valid: {', '.join(self.splits)}")
        return self.splits[split]
