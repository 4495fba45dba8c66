"""Multi-query associative recall (MQAR), generated (Arora et al. 2023, "Zoology", Sec. 3.1 and App. E).

An example is ``L`` tokens: first ``P`` key-value pairs ``k_1 v_1 k_2 v_2 ... k_P v_P``
(distinct keys from the lower half of the vocabulary, distinct values from the upper
half), then a query region of ``L - 2P`` tokens in which every key appears once more as
a *query*. The target at a query position is the value that followed that key in the
context; every other position has no target (label :data:`IGNORE`) and counts neither in
the loss nor in the accuracy.

The query of pair ``i`` lies at offset ``2 g_i`` of the query region, with the slots
``g_1, ..., g_P`` drawn without replacement from ``{0, ..., S - 1}``, ``S = (L - 2P) / 2``,
with probabilities following a power law (Zoology, App. E)

.. math::
    p(g) \\propto a\\,(g + 1)^{a - 1},

so that for small ``a`` most queries come soon after the context and a few come far
later. Positions of the query region that hold no query are filled with tokens drawn
uniformly from the whole vocabulary (``random_non_queries``; Zoology's default) or left
as the filler token 0.

Token 0 is padding/filler and never a key or value: keys come from ``{1, ..., V/2 - 1}``,
values from ``{V/2, ..., V - 1}`` and random non-query tokens from ``{1, ..., V - 1}``.
Zoology predicts the value as the next token of a causal language model, i.e. at the
position of the query key; here the label sits at the same position. No token after a
query carries its answer (the region after the context holds only queries and random
tokens), so the task is free of leakage for bidirectional encoders as well.

Generation draws from ``numpy.random.default_rng([seed, split])``, so the data are the
same on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np

from attnas.config import CheckedConfig, PositiveInt, Range, Seed
from attnas.core.errors import ConfigError

#: Label of positions that are not queries (ignored by the loss and the accuracy).
IGNORE = -100
#: The padding / filler token.
FILLER = 0
SPLIT_INDEX = {"train": 0, "val": 1, "test": 2}


@dataclass(frozen=True)
class MQARConfig(CheckedConfig):
    """How MQAR is generated (defaults: a quick setting that trains on one CPU core in minutes).

    Attributes:
        vocab_size: Number of token ids ``V`` (keys from the lower half, values from the upper).
        seq_len: Tokens per example ``L``.
        num_pairs: Key-value pairs ``P`` per example, each queried once.
        power_a: Exponent ``a`` of the power law over query slots (Zoology: 0.01).
        random_non_queries: Fill non-query positions with random tokens (else with token 0).
        train_size: Training examples.
        val_size: Validation examples.
        test_size: Test examples.
        seed: Seed of the generator.
    """

    vocab_size: PositiveInt = 128
    seq_len: PositiveInt = 64
    num_pairs: PositiveInt = 4
    power_a: Annotated[float, Range(0, 1, low_open=True)] = 0.01
    random_non_queries: bool = True
    train_size: PositiveInt = 10000
    val_size: PositiveInt = 1000
    test_size: PositiveInt = 1000
    seed: Seed = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.vocab_size // 2 - 1 < self.num_pairs:
            raise ConfigError(f"vocab_size: {self.vocab_size} leaves {self.vocab_size // 2 - 1} keys for "
                              f"num_pairs={self.num_pairs}; need vocab_size >= {2 * (self.num_pairs + 1)}")
        if self.seq_len < 4 * self.num_pairs:
            raise ConfigError(f"seq_len: {self.seq_len} is too short for num_pairs={self.num_pairs} "
                              f"(the context and one query slot per pair need seq_len >= {4 * self.num_pairs})")

    @property
    def query_slots(self) -> int:
        """Slots ``S`` of the query region a query may occupy."""
        return (self.seq_len - 2 * self.num_pairs) // 2

    def size(self, split: str) -> int:
        """Examples of ``split``."""
        return {"train": self.train_size, "val": self.val_size, "test": self.test_size}[split]


def slot_probabilities(slots: int, power_a: float) -> np.ndarray:
    """The power law ``p(g) ∝ a (g + 1)^(a - 1)`` over ``g = 0, ..., slots - 1`` (normalised)."""
    p = power_a * np.arange(1, slots + 1, dtype=np.float64) ** (power_a - 1)
    return p / p.sum()


def _distinct(rng: np.random.Generator, n: int, low: int, high: int, k: int) -> np.ndarray:
    """``[n, k]`` rows of ``k`` distinct integers from ``[low, high)``, uniformly."""
    return np.argsort(rng.random((n, high - low)), axis=1)[:, :k] + low


def generate_mqar(config: MQARConfig, split: str) -> tuple[np.ndarray, np.ndarray]:
    """The examples of one split.

    Args:
        config: Generation options.
        split: ``train``, ``val`` or ``test`` (each has its own stream of the seed).

    Returns:
        ``(tokens [N, L] int64, labels [N, L] int64)``; labels are :data:`IGNORE` except at
        the ``P`` query positions of each row, where they are the queried key's value.
    """
    if split not in SPLIT_INDEX:
        raise ConfigError(f"unknown split '{split}'; valid: {', '.join(SPLIT_INDEX)}")
    c = config
    n, length, pairs, vocab = c.size(split), c.seq_len, c.num_pairs, c.vocab_size
    rng = np.random.default_rng([c.seed, SPLIT_INDEX[split]])
    half = vocab // 2
    keys = _distinct(rng, n, 1, half, pairs)
    values = _distinct(rng, n, half, vocab, pairs)
    p = slot_probabilities(c.query_slots, c.power_a)
    slots = np.stack([rng.choice(c.query_slots, size=pairs, replace=False, p=p) for _ in range(n)])
    if c.random_non_queries:
        tokens = rng.integers(1, vocab, size=(n, length))
    else:
        tokens = np.full((n, length), FILLER, dtype=np.int64)
    tokens[:, 0 : 2 * pairs : 2] = keys
    tokens[:, 1 : 2 * pairs : 2] = values
    query_pos = 2 * pairs + 2 * slots
    rows = np.arange(n)[:, None]
    tokens[rows, query_pos] = keys
    labels = np.full((n, length), IGNORE, dtype=np.int64)
    labels[rows, query_pos] = values
    return tokens.astype(np.int64), labels
