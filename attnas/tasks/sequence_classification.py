"""Sequence classification: one label per token sequence (ListOps; byte- or word-level text).

Datasets: ``listops`` (generated, :mod:`attnas.data.listops`) and every registered text
dataset (``sst2``, ``sst5``, ``csv``) read at byte or word level
(:mod:`attnas.data.text_sequences`, options under ``text``).

Batches are dictionaries ``{"tokens": [B, L] long, "mask": [B, L] bool, "y": [B] long}``
padded to the longest sequence of the batch (``mask`` is True at real tokens). Models
return logits ``[B, num_classes]``; the metric is accuracy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from attnas import registry
from attnas.config import CheckedConfig, PositiveInt
from attnas.core.errors import ConfigError, unknown_name
from attnas.data.listops import ListOpsConfig
from attnas.data.text_sequences import TextSequencesConfig, load_text_sequences, text_dataset_names
from attnas.data.token_sequences import SPLITS, TokenSequences, batch_indices, check_split, pad_sequences
from attnas.tasks.base import SplitTensorsTask, TaskInfo

#: Datasets this task reads, and the name of the option section that configures each.
DATASET_OPTIONS = {"listops": "listops"}


@dataclass(frozen=True)
class SequenceClassificationConfig(CheckedConfig):
    """Options of :class:`SequenceClassificationTask`.

    Attributes:
        dataset: ``listops`` or a text dataset (``sst2``, ``sst5``, ``csv``).
        listops: ListOps generation options (LRA's setting by default).
        text: How a text dataset becomes tokens (bytes or words, truncation, CSV file).
        batch_size: Default batch size of :meth:`SequenceClassificationTask.batches`.
    """

    dataset: str = "listops"
    listops: ListOpsConfig = field(default_factory=ListOpsConfig)
    text: TextSequencesConfig = field(default_factory=TextSequencesConfig)
    batch_size: PositiveInt = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dataset not in DATASET_OPTIONS and not registry.is_registered("dataset", self.dataset,
                                                                                modality="text"):
            valid = sorted(DATASET_OPTIONS) + text_dataset_names()
            raise ConfigError("dataset: " + unknown_name("sequence dataset", self.dataset, valid))


@registry.register_task("sequence-classification")
class SequenceClassificationTask(SplitTensorsTask):
    """Classify token sequences (ListOps, or byte/word-level text).

    Args:
        options: A :class:`SequenceClassificationConfig`.
        data_root: Data root (unused by generated datasets).
    """

    name = "sequence-classification"
    Config = SequenceClassificationConfig
    metric = "accuracy"

    def __init__(self, options: SequenceClassificationConfig | None = None, data_root: Path | None = None):
        super().__init__(options, data_root)
        self.data = self._load(self.options.dataset)
        self._tensors = {split: self._pack(split) for split in SPLITS}

    def _load(self, dataset: str) -> TokenSequences:
        if dataset not in DATASET_OPTIONS:
            return load_text_sequences(dataset, self.options.text, self.data_root)
        loader = registry.get("dataset", dataset)
        section = DATASET_OPTIONS.get(dataset)
        dataset_options = getattr(self.options, section) if section else None
        return loader(dataset_options, self.data_root)

    def _pack(self, split: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        seqs, labels = self.data.splits[split]
        tokens, lengths = pad_sequences(seqs, self.data.pad_id)
        return tokens.to(self.device), lengths.to(self.device), torch.as_tensor(labels, dtype=torch.long,
                                                                               device=self.device)

    @property
    def info(self) -> TaskInfo:
        """Vocabulary size as ``in_dim``; ``extra`` holds ``vocab_size``, ``max_len``, ``pad_id``, ``dataset``."""
        return TaskInfo(
            kind="sequence",
            in_dim=self.data.vocab_size,
            num_classes=self.data.num_classes,
            extra={"vocab_size": self.data.vocab_size, "max_len": self.data.max_len, "pad_id": self.data.pad_id,
                   "dataset": self.data.name},
        )

    def size(self, split: str) -> int:
        """Number of examples in ``split``."""
        return self.data.size(self._check_split(split))

    def _check_split(self, split: str) -> str:
        return check_split(split)

    def batches(self, split: str, *, shuffle: bool = False, generator: torch.Generator | None = None,
                batch_size: int | None = None) -> Iterator[dict[str, torch.Tensor]]:
        """Batches ``{"tokens", "mask", "y"}`` of ``split``, padded to the batch's longest sequence
        (arguments: :meth:`~attnas.tasks.base.Task.batches`)."""
        tokens, lengths, labels = self._tensors[self._check_split(split)]
        bs = batch_size or self.options.batch_size
        for idx in batch_indices(labels.shape[0], bs, shuffle, generator, self.device):
            lens = lengths[idx]
            width = int(lens.max())
            tok = tokens[idx, :width]
            mask = torch.arange(width, device=self.device)[None, :] < lens[:, None]
            yield {"tokens": tok, "mask": mask, "y": labels[idx]}

    def loss(self, output: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Cross-entropy of the logits ``output [B, C]``."""
        return F.cross_entropy(output, batch["y"])

    def with_dataset(self, dataset: str) -> SequenceClassificationTask:
        """The same task on another registered sequence dataset."""
        valid = sorted(DATASET_OPTIONS) + text_dataset_names()
        if dataset not in valid:
            raise ConfigError(f"task '{self.name}': " + unknown_name("sequence dataset", dataset, valid))
        import dataclasses

        return SequenceClassificationTask(dataclasses.replace(self.options, dataset=dataset), self.data_root)
