"""A found model with plain tensors in and logits out, for ``torch.export`` and ONNX.

attnas models take one task batch (``model(batch)``): a graph batch object, a dict of token
ids and mask, a padded text batch or an image tensor. Exported programs take tensors only, so
:func:`tensor_input_model` wraps a model in a module that builds that batch from tensors
inside its ``forward``; :func:`example_inputs` makes inputs of the right shapes and types from the
stored task facts alone (no data), for tracing and for checking the exported program.

Inputs per task kind (``N`` nodes, ``E`` edges, ``B`` examples, ``L`` tokens):

========  ===========================================================  ==========================
kind      inputs                                                       output
========  ===========================================================  ==========================
node      ``x`` float ``[N, in_dim]``, ``edge_index`` int64 ``[2, E]``  ``[N, classes]`` logits
image     ``images`` float ``[B, channels, H, W]``                      ``[B, classes]`` logits
sequence  ``tokens`` int64 ``[B, L]``, ``mask`` bool ``[B, L]``          ``[B, classes]`` logits
text      ``tokens`` int64 ``[B, L]``, ``mask`` bool ``[B, L]``          ``[B, classes]`` logits
========  ===========================================================  ==========================

``mask`` is True at real tokens (padding on the right, ``pad_id`` at pad positions); token
inputs are padded to the model's ``max_len`` inside the wrapper (``L`` may be anything up to it).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from attnas.core.errors import UnsupportedError

#: kind -> (input names, what each is).
INPUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "node": (("x", "float32 [N, in_dim] node features"), ("edge_index", "int64 [2, E] directed edges (source, target)")),
    "image": (("images", "float32 [B, channels, H, W] images, normalised as in training"),),
    "sequence": (("tokens", "int64 [B, L] token ids, pad_id at pad positions"),
                 ("mask", "bool [B, L] True at real tokens (right padding)")),
    "text": (("tokens", "int64 [B, L] vocabulary ids, pad_id at pad positions"),
             ("mask", "bool [B, L] True at real tokens (right padding)")),
}


def input_names(kind: str) -> list[str]:
    """The names of the tensor inputs of a task kind.

    Raises:
        UnsupportedError: For a kind whose models take no tensors (e.g. ``architectures``).
    """
    if kind not in INPUTS:
        raise UnsupportedError(f"models of '{kind}' tasks cannot be exported (tensor inputs are defined for "
                               f"{', '.join(INPUTS)} tasks)")
    return [name for name, _ in INPUTS[kind]]


class TensorInputModel(nn.Module):
    """Base of the wrappers that give a found model tensor inputs (one subclass per task kind).

    Args:
        model: A found model (``forward(batch)``).
    """

    kind = ""

    def __init__(self, model: nn.Module, pad_to: int = 0, pad_id: int = 0):
        super().__init__()
        self.model, self.pad_to, self.pad_id = model, pad_to, pad_id

    def padded(self, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``tokens`` and ``mask`` padded on the right to ``pad_to`` tokens (pad ids, False).

        Token models are padding-invariant (pads are masked out of attention and pooling), and
        a fixed length keeps block-wise attention (blocks of a few tokens) from specialising
        a traced program to the traced length's remainder.
        """
        if not self.pad_to:
            return tokens, mask
        extra = self.pad_to - tokens.shape[1]
        torch._check(extra >= 0, lambda: f"sequences longer than the model's max_len {self.pad_to}")
        return F.pad(tokens, (0, extra), value=self.pad_id), F.pad(mask, (0, extra), value=False)


class NodeInputModel(TensorInputModel):
    """A node-classification model on ``(x, edge_index)``."""

    kind = "node"

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Logits ``[N, classes]`` of the nodes of the graph ``x [N, F]``, ``edge_index [2, E]``.

        The features are used dense (``sparse_x`` is None): the sparse form the training used for
        bag-of-words features depends on how many values are non-zero, which a traced program
        cannot branch on; both give the same products.
        """
        from attnas.tasks.node_classification import NodeBatch

        return self.model(NodeBatch(x, edge_index, torch.zeros(0, dtype=torch.long, device=x.device), None,
                                    key="export", cache={"sparse_x": None}))


class ImageInputModel(TensorInputModel):
    """An image classifier on ``images``."""

    kind = "image"

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, classes]`` of ``images [B, C, H, W]``."""
        return self.model(images)


class SequenceInputModel(TensorInputModel):
    """A token-sequence classifier on ``(tokens, mask)``."""

    kind = "sequence"

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, classes]`` of ``tokens [B, L]`` with ``mask [B, L]`` (True at real tokens)."""
        tokens, mask = self.padded(tokens, mask)
        return self.model({"tokens": tokens, "mask": mask})


class TextInputModel(TensorInputModel):
    """A text classifier on ``(tokens, mask)`` (lengths are the mask's row sums)."""

    kind = "text"

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, classes]`` of ``tokens [B, L]`` with ``mask [B, L]`` (True at real tokens)."""
        from attnas.tasks.text_classification import TextBatch

        tokens, mask = self.padded(tokens, mask)
        lengths = mask.sum(dim=1)
        return self.model(TextBatch(tokens, mask, lengths, torch.zeros_like(lengths), lengths.cpu()))


_WRAPPERS = {cls.kind: cls for cls in (NodeInputModel, ImageInputModel, SequenceInputModel, TextInputModel)}


def tensor_input_model(model: nn.Module, kind: str, info: Any = None) -> TensorInputModel:
    """``model`` wrapped to take the tensor inputs of its task kind (in eval mode).

    Args:
        model: A found model.
        kind: Its task's kind.
        info: Its TaskInfo: token inputs are then padded to its ``max_len``.
    """
    input_names(kind)
    extra = getattr(info, "extra", None) or {}
    pad_to = int(extra.get("max_len", 0)) if kind in ("sequence", "text") else 0
    return _WRAPPERS[kind](model, pad_to, int(extra.get("pad_id", 0))).eval()


def example_inputs(info: Any, size: int = 0, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Inputs of the right shapes and types for a model of ``info`` (a TaskInfo), random.

    Args:
        info: The task facts the model was built from.
        size: Nodes (node tasks) or examples (others); 0: 12 nodes or 3 examples.
        seed: Seed of the random values.
    """
    g = torch.Generator().manual_seed(seed)
    kind, extra = info.kind, info.extra
    input_names(kind)
    if kind == "node":
        n = size or 12
        src = torch.arange(n)
        ring = torch.stack([src, (src + 1) % n])
        extra_edges = torch.randint(0, n, (2, n), generator=g)
        edge_index = torch.cat([ring, ring.flip(0), extra_edges], dim=1)
        return torch.randn(n, info.in_dim, generator=g), edge_index
    b = size or 3
    if kind == "image":
        h, w = extra.get("image_size", (32, 32))
        return (torch.randn(b, info.in_dim, int(h), int(w), generator=g),)
    length = min(11 if size else 16, int(extra.get("max_len", 16)))  # another length when another size
    vocab, pad = int(extra.get("vocab_size", info.in_dim)), int(extra.get("pad_id", 0))
    lengths = torch.randint(max(1, length // 2), length + 1, (b,), generator=g)
    lengths[0] = length
    mask = torch.arange(length)[None, :] < lengths[:, None]
    tokens = torch.randint(0, vocab, (b, length), generator=g)
    tokens = torch.where(tokens == pad, (tokens + 1) % vocab, tokens)
    return torch.where(mask, tokens, torch.full_like(tokens, pad)), mask


def dynamic_shapes(kind: str) -> tuple[dict[int, Any], ...]:
    """``torch.export`` dynamic-shape hints: nodes and edges, or batch and length, may vary
    (``Dim.AUTO``: a dimension the model's code fixes stays static instead of failing)."""
    auto = torch.export.Dim.AUTO
    if kind == "node":
        return {0: auto}, {1: auto}
    if kind == "image":
        return ({0: auto},)
    return {0: auto, 1: auto}, {0: auto, 1: auto}


def tensors_of(kind: str, batch: Any) -> tuple[torch.Tensor, ...]:
    """The tensor inputs (:data:`INPUTS` order) of a task batch, for an exported program.

    Args:
        kind: The task's kind.
        batch: A batch of the task (``task.batches(split)``).
    """
    input_names(kind)
    if kind == "node":
        return batch.x, batch.edge_index
    if kind == "image":
        return (batch[0] if isinstance(batch, (tuple, list)) else batch,)
    return batch["tokens"], batch["mask"]
