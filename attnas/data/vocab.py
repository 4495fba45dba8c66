"""Vocabulary and fixed-length encoding of tokenised text.

Id 0 is padding and id 1 the unknown word; the other words follow in order of falling
frequency (ties alphabetical), so a vocabulary is a deterministic function of its
input. Words are stored *normalised* (e.g. lowercased, PTB escapes undone), which is
also the key used to look them up in GloVe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnas.core.errors import ConfigError
from attnas.data.text_dataset import lowercase

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1


@dataclass
class EncodedText:
    """Token ids padded/truncated to a fixed length.

    Attributes:
        ids: ``[N, max_len]`` long; ``PAD_ID`` after each sequence's end.
        lengths: ``[N]`` long, the number of real tokens (``1 <= length <= max_len``).
    """

    ids: torch.Tensor
    lengths: torch.Tensor

    def __len__(self) -> int:
        return self.ids.shape[0]


def lengths_to_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """``[B, max_len]`` bool mask, True at the first ``lengths[b]`` positions of row ``b``."""
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


class Vocab:
    """A word-to-id mapping with padding and unknown-word ids.

    Args:
        words: The words after the two special tokens, in id order (normalised, distinct).
        normalize: Maps a raw token to its vocabulary key.
    """

    def __init__(self, words: Sequence[str], normalize: Callable[[str], str] = lowercase):
        self.itos: list[str] = [PAD, UNK, *words]
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ConfigError("vocabulary words must be distinct")
        self.normalize = normalize

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], normalize: Callable[[str], str] = lowercase,
              min_freq: int = 1, extra_words: Iterable[str] = ()) -> Vocab:
        """Count normalised tokens and keep those seen at least ``min_freq`` times.

        Args:
            token_lists: Tokenised examples (usually the training split).
            normalize: Maps a token to its vocabulary key.
            min_freq: Minimum count of a word.
            extra_words: Raw tokens added after the counted words (e.g. words of other
                splits that have a pretrained vector), when not already present.
        """
        if min_freq < 1:
            raise ConfigError(f"min_freq must be >= 1, got {min_freq}")
        counts = Counter(normalize(t) for tokens in token_lists for t in tokens)
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        seen = set(words) | {PAD, UNK}
        for t in extra_words:
            w = normalize(t)
            if w not in seen:
                seen.add(w)
                words.append(w)
        return cls(words, normalize)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return self.normalize(token) in self.stoi

    @property
    def pad_id(self) -> int:
        return PAD_ID

    @property
    def unk_id(self) -> int:
        return UNK_ID

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Ids of ``tokens`` (unknown words map to ``UNK_ID``)."""
        get, norm = self.stoi.get, self.normalize
        return [get(norm(t), UNK_ID) for t in tokens]

    def encode_many(self, token_lists: Sequence[Sequence[str]], max_len: int) -> EncodedText:
        """Encode examples, keeping the first ``max_len`` tokens of each.

        Args:
            token_lists: Tokenised examples, each with at least one token.
            max_len: Length every row is padded or truncated to.
        """
        if max_len < 1:
            raise ConfigError(f"max_len must be >= 1, got {max_len}")
        ids = np.full((len(token_lists), max_len), PAD_ID, dtype=np.int64)
        lengths = np.zeros(len(token_lists), dtype=np.int64)
        for i, tokens in enumerate(token_lists):
            row = self.encode(tokens[:max_len])
            if not row:
                raise ConfigError(f"example {i} has no tokens")
            ids[i, : len(row)] = row
            lengths[i] = len(row)
        return EncodedText(torch.from_numpy(ids), torch.from_numpy(lengths))

    def coverage(self, token_lists: Iterable[Sequence[str]]) -> float:
        """Fraction of tokens in ``token_lists`` that are in the vocabulary."""
        total = known = 0
        for tokens in token_lists:
            for t in tokens:
                total += 1
                known += self.normalize(t) in self.stoi
        return known / total if total else 0.0
