"""Between a search space and the graph VAEs: architectures to DAG datasets and back.

Any space with ``to_dag``, ``from_dag`` and ``dag_vocabulary`` (the ``dag`` capability,
e.g. AutoAttend and ENAS) can feed a graph VAE: :func:`space_dataset` encodes
architectures with the space's vocabulary (its ``input`` and ``output`` vertices become
the VAE's start and end types), and :class:`SpaceDecoder` turns decoded graphs back into
architectures, a decoding counting as valid exactly when ``space.from_dag`` accepts it
(Chatzianastasis et al., 2021, Sec. 4.3 / D-VAE: only valid decodings are evaluated).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError, DataError
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.dag_dataset import DagDataset


def space_vocabulary(space) -> tuple[str, ...]:
    """The space's DAG labels in DagDataset order (input, output, then the operations).

    Raises:
        ConfigError: When the space has no vocabulary or it does not start with its input
            and output labels.
    """
    vocab = getattr(space, "dag_vocabulary", None)
    if vocab is None or not hasattr(space, "from_dag"):
        raise ConfigError(f"space '{space.name}' has no dag_vocabulary/from_dag: graph VAEs cannot decode into it")
    vocab = tuple(vocab())
    if len(vocab) < 3 or len(set(vocab)) != len(vocab):
        raise ConfigError(f"space '{space.name}': dag_vocabulary must list input, output and the operations once each")
    return vocab


def space_dataset(space, archs: Sequence[Arch], y: Sequence[float] | None = None,
                  max_nodes: int | None = None) -> DagDataset:
    """A :class:`DagDataset` of ``archs`` in the space's vocabulary.

    The DAGs' own first and last vertices (``vocab[0]`` and ``vocab[1]``, e.g. ``input``
    and ``output``) are the VAE's start and end vertices.

    Raises:
        DataError: When a DAG has a second source or sink besides its input and output
            vertex (D-VAE's decoder could not produce it).
    """
    vocab = space_vocabulary(space)
    return DagDataset.from_dags([space.to_dag(a) for a in archs], y=y, vocab=vocab, input_label=vocab[0],
                                output_label=vocab[1], max_nodes=max_nodes)


class SpaceDecoder:
    """Decoded graphs to architectures of ``space``; memoised by graph key.

    Args:
        space: The space (``from_dag`` gives the architecture or raises ArchError).
        vocab: The vertex-type vocabulary of the VAE's data (:attr:`DagDataset.vocab`).
    """

    def __init__(self, space, vocab: Sequence[str]):
        self.space = space
        self.vocab = tuple(vocab)
        self._cache: dict[str, Arch | None] = {}

    def arch(self, adj, types: Sequence[int]) -> Arch | None:
        """The architecture of one decoded graph, or None when it is not one of the space."""
        try:
            labels = [self.vocab[int(t)] for t in types]
        except IndexError:
            raise DataError(f"a decoded vertex type is outside the vocabulary of {len(self.vocab)} types") from None
        try:
            return self.space.from_dag(adj.numpy() if isinstance(adj, Tensor) else adj, labels)
        except ArchError:
            return None

    def archs(self, batch: DagBatch) -> list[Arch | None]:
        """One architecture (or None) per graph of ``batch`` (each distinct graph converted once)."""
        keys = batch.keys()
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k not in self._cache:
                first.setdefault(k, i)
        if first:
            idx = list(first.values())
            for (adj, types), i in zip(batch.index(idx).graphs(), idx):
                self._cache[keys[i]] = self.arch(adj, types)
        return [self._cache[k] for k in keys]

    def is_valid(self, batch: DagBatch) -> Tensor:
        """``(G,)`` bool: which graphs are architectures of the space (for decoding in BO)."""
        return torch.tensor([a is not None for a in self.archs(batch)], dtype=torch.bool)
