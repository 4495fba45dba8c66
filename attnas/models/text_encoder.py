"""Pieces of AutoAttend's sentence encoder, and the 24-layer Transformer baseline.

The searched text models of AutoAttend (Guan et al., ICML 2021, Sec. 5.2.3) are

    tokens -> :class:`TextStem` -> n searched layers -> :class:`MaskedPoolingHead` -> logits

The stem embeds the tokens with GloVe-initialised, fine-tuned word embeddings and
projects them to the hidden size; the searched layers combine the text operations of
:mod:`attnas.ops.autoattend.text` and the attention layer of :mod:`attnas.ops.autoattend.sequence_attention`;
the head pools over the real tokens and classifies. These are the "domain adapter"
pieces a generic layer/connection space plugs in::

    h0, ctx = stem(batch)            # [B, L, H], SequenceContext
    x = op(h, ctx)                   # every connection
    x = attn(q, k, v, ctx)           # every attention layer
    logits = head(h_last, ctx)       # [B, num_classes]

:class:`TransformerTextClassifier` is the paper's "24-layer Transformer" baseline
(Table 4): the same stem and head around standard Transformer encoder layers.

All hidden states are zero at pad positions (see :mod:`attnas.ops.autoattend.sequence_context`).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from attnas.core.errors import ConfigError
from attnas.ops.autoattend.sequence_context import SequenceContext
from attnas.ops.shared.dropout import FastDropout
from attnas.ops.shared.positions import sinusoidal_positions

Pooling = Literal["max", "mean", "max+mean"]


def _embeddings_of(source: Any) -> torch.Tensor:
    """The initial embedding matrix of a task, a TaskInfo, or a tensor."""
    if isinstance(source, torch.Tensor):
        return source
    info = getattr(source, "info", source)
    extra = getattr(info, "extra", None) or {}
    if "embeddings" not in extra:
        raise ConfigError("the task offers no word embeddings (info.extra['embeddings']); is it a text task?")
    emb = extra["embeddings"]
    return emb() if callable(emb) else emb


class TextStem(nn.Module):
    r"""Word embeddings projected to the hidden size (the encoder's input layer).

    Embeddings are initialised from GloVe and fine-tuned (Sec. 5.2.3). As in the
    reference implementation the embedding is LayerNorm'd, projected by a kernel-1
    convolution (a ``Linear``), passed through ReLU and dropout:
    :math:`h_0 = \mathrm{Dropout}(\mathrm{ReLU}(W\,\mathrm{LN}(E[t]) + b)) \odot m`.

    Args:
        embeddings: ``[V, D]`` initial embedding matrix (row ``pad_id`` is padding).
        hidden: Hidden size :math:`H`.
        dropout: Dropout on the output (0.1 in the paper's search).
        freeze: Keep the embeddings fixed instead of fine-tuning them.
        pad_id: Id of the padding token (its row gets no gradient).
        pre_norm: LayerNorm on the embeddings.

    Shapes:
        - **input:** a batch with ``tokens`` :math:`(B, L)`, ``mask`` :math:`(B, L)`, ``lengths`` :math:`(B,)`
        - **output:** :math:`(B, L, H)` and the batch's :class:`SequenceContext`
    """

    def __init__(self, embeddings: torch.Tensor, hidden: int, *, dropout: float = 0.1, freeze: bool = False,
                 pad_id: int = 0, pre_norm: bool = True):
        super().__init__()
        if embeddings.dim() != 2:
            raise ConfigError(f"embeddings must be a [vocab, dim] matrix, got shape {tuple(embeddings.shape)}")
        self.embedding = nn.Embedding.from_pretrained(embeddings.detach().clone().float(), freeze=freeze,
                                                      padding_idx=pad_id)
        D = embeddings.shape[1]
        self.norm = nn.LayerNorm(D) if pre_norm else nn.Identity()
        self.proj = nn.Linear(D, hidden)
        self.dropout = FastDropout(dropout)
        self.hidden = hidden

    @classmethod
    def from_task(cls, task: Any, hidden: int, **kwargs: Any) -> TextStem:
        """A stem initialised with ``task.info.extra["embeddings"]()``."""
        pad = getattr(getattr(task, "info", task), "extra", {}).get("pad_id", 0)
        return cls(_embeddings_of(task), hidden, pad_id=pad, **kwargs)

    def forward(self, batch: Any) -> tuple[torch.Tensor, SequenceContext]:
        ctx = SequenceContext.from_batch(batch)
        h = self.dropout(F.relu(self.proj(self.norm(self.embedding(batch.tokens)))))
        return ctx.zero_pads(h), ctx


class MaskedPoolingHead(nn.Module):
    r"""Pool the real tokens of each sequence and classify (the encoder's output layer).

    ``max`` (the reference implementation's choice) takes :math:`\max_{t \le n} h_t`;
    ``mean`` averages the real tokens; ``max+mean`` concatenates both. A linear layer
    (initialised :math:`\mathcal{N}(0, 0.02)`, bias 0) gives the logits.

    Args:
        hidden: Hidden size :math:`H`.
        num_classes: Number of classes.
        pooling: ``max``, ``mean`` or ``max+mean``.
        dropout: Dropout on the pooled vector.

    Shapes:
        - **input:** :math:`(B, L, H)` and the batch's context
        - **output:** :math:`(B, C)` logits
    """

    def __init__(self, hidden: int, num_classes: int, *, pooling: Pooling = "max", dropout: float = 0.0):
        super().__init__()
        if pooling not in ("max", "mean", "max+mean"):
            raise ConfigError(f"pooling must be 'max', 'mean' or 'max+mean', got {pooling!r}")
        self.pooling = pooling
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden * (2 if pooling == "max+mean" else 1), num_classes)
        nn.init.normal_(self.classifier.weight, 0.0, 0.02)
        nn.init.zeros_(self.classifier.bias)

    def pool(self, h: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        """The pooled ``[B, H]`` (or ``[B, 2H]``) sentence vectors."""
        parts = []
        if "max" in self.pooling:
            parts.append(ctx.lowest_at_pads(h).amax(dim=1))
        if "mean" in self.pooling:
            parts.append(ctx.zero_pads(h).sum(dim=1) / ctx.lengths[:, None].to(h.dtype))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def forward(self, h: torch.Tensor, ctx: SequenceContext) -> torch.Tensor:
        return self.classifier(self.dropout(self.pool(h, ctx)))



class TransformerTextClassifier(nn.Module):
    r"""The "24-layer Transformer" baseline of AutoAttend's Table 4.

    :class:`TextStem` -> position encodings -> ``layers`` standard Transformer encoder
    layers (Vaswani et al., 2017: multi-head self-attention with key padding masks and a
    feed-forward block, residual connections, LayerNorm) -> :class:`MaskedPoolingHead`.
    Pre-LayerNorm layers (``norm_first``) by default, which train stably at depth 24.

    Args:
        embeddings: ``[V, D]`` initial word embeddings.
        num_classes: Number of classes.
        hidden: Model size :math:`H` (64 in the paper's NLP setting).
        layers: Number of encoder layers (24).
        heads: Attention heads (8).
        ff_dim: Feed-forward size (default ``4 * hidden``).
        dropout: Dropout (0.1).
        max_len: Longest sequence (for the position table).
        positions: ``sinusoidal``, ``learned`` or ``none``.
        pooling: Head pooling.
        norm_first: Pre-LN (True) or post-LN (False) layers.
        pad_id: Padding token id.

    Shapes:
        - **input:** a text batch (``tokens``, ``mask``, ``lengths``)
        - **output:** :math:`(B, C)` logits
    """

    def __init__(self, embeddings: torch.Tensor, num_classes: int, *, hidden: int = 64, layers: int = 24,
                 heads: int = 8, ff_dim: int | None = None, dropout: float = 0.1, max_len: int = 64,
                 positions: Literal["sinusoidal", "learned", "none"] = "sinusoidal", pooling: Pooling = "max",
                 norm_first: bool = True, pad_id: int = 0):
        super().__init__()
        if hidden % heads:
            raise ConfigError(f"heads ({heads}) must divide hidden ({hidden})")
        if positions not in ("sinusoidal", "learned", "none"):
            raise ConfigError(f"positions must be 'sinusoidal', 'learned' or 'none', got {positions!r}")
        self.stem = TextStem(embeddings, hidden, dropout=dropout, pad_id=pad_id)
        self.positions = positions
        if positions == "learned":
            self.pos = nn.Parameter(torch.zeros(max_len, hidden))
            nn.init.normal_(self.pos, 0.0, 0.02)
        elif positions == "sinusoidal":
            self.register_buffer("pos", sinusoidal_positions(max_len, hidden), persistent=False)
        layer = nn.TransformerEncoderLayer(hidden, heads, ff_dim or 4 * hidden, dropout, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(hidden) if norm_first else None,
                                             enable_nested_tensor=False)
        self.head = MaskedPoolingHead(hidden, num_classes, pooling=pooling)

    @classmethod
    def from_task(cls, task: Any, **kwargs: Any) -> TransformerTextClassifier:
        """The baseline for ``task`` (embeddings, classes and max length from ``task.info``)."""
        info = getattr(task, "info", task)
        kwargs.setdefault("max_len", info.extra.get("max_len", 64))
        kwargs.setdefault("pad_id", info.extra.get("pad_id", 0))
        return cls(_embeddings_of(task), info.num_classes, **kwargs)

    def forward(self, batch: Any) -> torch.Tensor:
        """Class logits of a batch of sentences.

        Args:
            batch: A :class:`~attnas.tasks.text_classification.TextBatch`: ``tokens`` int64
                ``[B, L]`` vocabulary ids (``pad_id`` at pad positions), ``mask`` bool ``[B, L]``
                True at real tokens, ``lengths`` int64 ``[B]`` (``y`` is not read).

        Returns:
            ``[B, classes]`` logits.
        """
        h, ctx = self.stem(batch)
        if self.positions != "none":
            L = h.shape[1]
            if L > self.pos.shape[0]:
                raise ConfigError(f"sequence length {L} exceeds the model's max_len {self.pos.shape[0]}")
            h = ctx.zero_pads(h + self.pos[:L])
        h = self.encoder(h, src_key_padding_mask=~ctx.mask)
        return self.head(ctx.zero_pads(h), ctx)
