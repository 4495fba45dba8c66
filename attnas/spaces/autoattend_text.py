"""AutoAttend on text: the stem, head, attention layer and operations of the sentence encoder.

Guan et al., *AutoAttend*, ICML 2021, Sec. 5.1.1, 5.2.2-5.2.3 (NLP), following TextNAS
(Wang et al., AAAI 2020) where the paper is silent::

    tokens -> TextStem -> n searched layers -> MaskedPoolingHead -> logits

- **Stem** (:class:`~attnas.models.text_encoder.TextStem`): GloVe-initialised word
  embeddings, fine-tuned (Sec. 5.2.3), LayerNorm'd, projected to the hidden size, ReLU,
  dropout. Shared by all architectures.
- **Operations**: the ``text`` pool of Table 3 (:mod:`attnas.ops.autoattend.text`: zero, identity,
  conv1, conv3, max_pool3, gru) plus, for the Table 6 baseline space only,
  ``self_attention`` (:class:`~attnas.ops.autoattend.sequence_attention.SelfAttentionOp`). The
  parametric ones LayerNorm their input and drop out their output (``space.dropout``).
- **Addition layer**: the sum of its two connections followed by dropout
  (``space.dropout``), as the reference implementation's aggregation layer does.
- **Attention layer** (:class:`~attnas.ops.autoattend.sequence_attention.SequenceAttention`): Eq. 8
  with ``space.heads`` heads (8 in the paper), no projections (the connections' operations
  are the projections, Eq. 4), pad keys masked, dropout ``space.attn_dropout`` on the
  attention weights, then dropout ``space.dropout`` and a LayerNorm. Each layer position
  has its own LayerNorm (shared by all architectures in the supernet).
- **Head** (:class:`~attnas.models.text_encoder.MaskedPoolingHead`): max-pooling over
  the real tokens and a linear classifier.

Padding never leaks: every operation returns zeros at pad positions, the attention
masks pad keys, and the head pools real tokens only, so a sentence's logits do not
depend on how much its batch is padded.

Text-specific options go in the space's ``options`` mapping (all optional)::

    space: {name: autoattend, pool: text, layers: 24, hidden: 64, heads: 8,
            dropout: 0.1, attn_dropout: 0.1,
            options: {pooling: max, pre_norm: true, gru: sum, freeze_embeddings: false}}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from torch import nn

from attnas import registry
from attnas.config import CheckedConfig, from_mapping
from attnas.core.errors import ConfigError
from attnas.models.text_encoder import MaskedPoolingHead, TextStem
from attnas.ops.autoattend.sequence_attention import SequenceAttention
from attnas.spaces.autoattend_networks import register_adapter
from attnas.tasks.base import TaskInfo


@dataclass(frozen=True)
class TextAdapterConfig(CheckedConfig):
    """Text options of the AutoAttend space (``space.options``).

    Attributes:
        pooling: Head pooling over real tokens: ``max`` (the reference's), ``mean``, ``max+mean``.
        pre_norm: LayerNorm on the input of every parametric operation (TextNAS / reference).
        gru: Bidirectional GRU directions ``sum`` (reference), ``concat`` (H/2 each) or ``forward``.
        freeze_embeddings: Keep the GloVe embeddings fixed (the paper fine-tunes them).
        attention_norm: LayerNorm after the attention layer (reference implementation).
    """

    pooling: Literal["max", "mean", "max+mean"] = "max"
    pre_norm: bool = True
    gru: Literal["sum", "concat", "forward"] = "sum"
    freeze_embeddings: bool = False
    attention_norm: bool = True


#: The former name of :class:`TextAdapterConfig`, still importable.
TextAdapterOptions = TextAdapterConfig


@register_adapter("text")
class TextAdapter:
    """Builds the text pieces of an AutoAttend network from the space's options.

    Args:
        space: The :class:`~attnas.spaces.autoattend.AutoAttendSpace` (its ``pool`` must be ``text``).
        info: The text task's :class:`~attnas.tasks.base.TaskInfo` (``extra["embeddings"]``).
    """

    #: the text operations drop out their own outputs (reference implementation), so the
    #: core's dropout on operation inputs is off
    input_dropout = 0.0
    #: one attention module per layer: each has its own LayerNorm
    per_layer_attention = True

    def __init__(self, space: Any, info: TaskInfo):
        self.opts = space.options
        self.info = info
        if self.opts.pool != "text":
            raise ConfigError(f"space.pool: text tasks need the 'text' operation pool, got {self.opts.pool!r}")
        if self.opts.stem != "project" or self.opts.head != "linear":
            raise ConfigError(f"space.stem / space.head: text networks have an embedding stem and a pooling head "
                              f"(stem: project, head: linear), got stem {self.opts.stem!r}, head {self.opts.head!r}")
        self.text = from_mapping(TextAdapterConfig, self.opts.options or {}, "space.options")
        self.add_dropout = self.opts.dropout

    def stem(self) -> nn.Module:
        """The GloVe-initialised embedding stem."""
        return TextStem.from_task(self.info, self.opts.hidden, dropout=self.opts.dropout,
                                  freeze=self.text.freeze_embeddings, pre_norm=self.text.pre_norm)

    def head(self) -> nn.Module:
        """Masked pooling and a linear classifier."""
        return MaskedPoolingHead(self.opts.hidden, self.info.num_classes, pooling=self.text.pooling)

    def attention(self) -> nn.Module:
        """The attention layer's aggregation (Eq. 8, no projections)."""
        return SequenceAttention(self.opts.hidden, self.opts.heads, attn_dropout=self.opts.attn_dropout,
                                 dropout=self.opts.dropout, norm=self.text.attention_norm)

    def op(self, name: str, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        """The operation ``name`` of the ``text`` pool, hidden -> hidden (``in_dim == out_dim == hidden``)."""
        factory = registry.get("op", name, group="text")
        h, p, pre = self.opts.hidden, self.opts.dropout, self.text.pre_norm
        if name in ("conv1", "conv3"):
            return factory(h, dropout=p, pre_norm=pre)
        if name == "gru":
            return factory(h, dropout=p, pre_norm=pre, directions=self.text.gru)
        if name == "max_pool3":
            return factory(h, pre_norm=pre)
        if name == "self_attention":
            return factory(h, heads=self.opts.heads, dropout=self.opts.attn_dropout, pre_norm=pre)
        return factory(h)
