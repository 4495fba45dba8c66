"""A tokenised sequence-classification dataset held in memory.

The common currency between sequence datasets (ListOps now; byte- and word-level text
later) and :class:`~attnas.tasks.sequence_classification.SequenceClassificationTask`:
token ids per example, an integer label per example, the vocabulary (id 0 is padding)
and the number of classes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from attnas.core.errors import ConfigError, DataError

SPLITS = ("train", "val", "test")


@dataclass
class TokenSequences:
    """Tokenised splits of a sequence-classification dataset.

    Attributes:
        name: Dataset name (for messages).
        vocab: Token strings by id; ``vocab[pad_id]`` is the padding token.
        num_classes: Number of labels.
        splits: ``split -> (token id lists, labels)`` for ``train``, ``val``, ``test``.
        max_len: The longest sequence a model must accept (a bound of the dataset's
            definition, not only of the examples drawn).
        pad_id: Id of the padding token.
        meta: Free-form facts (generation options, sources).
    """

    name: str
    vocab: tuple[str, ...]
    num_classes: int
    splits: dict[str, tuple[list[list[int]], list[int]]]
    max_len: int
    pad_id: int = 0
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for split in SPLITS:
            if split not in self.splits:
                raise DataError(f"{self.name}: split '{split}' is missing")
            seqs, labels = self.splits[split]
            if len(seqs) != len(labels):
                raise DataError(f"{self.name}: split '{split}' has {len(seqs)} sequences but {len(labels)} labels")

    @property
    def vocab_size(self) -> int:
        """Number of token ids (including padding)."""
        return len(self.vocab)

    def size(self, split: str) -> int:
        """Number of examples in ``split``."""
        return len(self.splits[split][1])


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token id lists into a tensor.

    Args:
        seqs: Token id lists (at least one token each).
        pad_id: The padding id.

    Returns:
        ``(tokens [N, Lmax] long, lengths [N] long)``.
    """
    if not len(seqs):
        return torch.zeros(0, 1, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    if int(lengths.min()) < 1:
        raise DataError("a sequence has no tokens")
    tokens = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        tokens[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return tokens, lengths


def check_split(split: str) -> str:
    """``split`` if it is one of :data:`SPLITS`, else a one-line :class:`ConfigError`."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split '{split}'; valid: {', '.join(SPLITS)}")
    return split


def batch_indices(n: int, batch_size: int, shuffle: bool, generator: torch.Generator | None,
                  device: torch.device) -> Iterator[torch.Tensor]:
    """Indices of each batch of ``n`` examples, in order or shuffled (drawn on the CPU from ``generator``)."""
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    order = order.to(device)
    for start in range(0, n, batch_size):
        yield order[start : start + batch_size]
