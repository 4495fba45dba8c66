"""Networks of the stage-wise full-attention search space (Zhou et al., 2021, Table I).

The macro-architecture (Zhou et al., 2021, Sec. III.A, Table I, Fig. 1(a)):

=========  ==================  ===================  ======  ========
part       operation           output channels      layers  stride
=========  ==================  ===================  ======  ========
stem       Local SA_k3_h8      1 x init_channels    1       1
stage 1    searched            1 x init_channels    3       1
stage 2    searched            2 x init_channels    3       2
stage 3    searched            2 x init_channels    3       1
stage 4    searched            4 x init_channels    3       2
stage 5    searched            4 x init_channels    3       1
pooling    global AvgPool      4 x init_channels    1       1
output     FC                  num_classes          1       1
=========  ==================  ===================  ======  ========

The stride applies to the first layer of a stage. ``init_channels`` is 16 in Table I
(and in the search phase, Sec. IV.B); 80 and 96 are used for the final networks.

:class:`StagewiseNetwork` is one discrete architecture; :class:`RelaxedStagewiseNetwork`
is the DARTS relaxation (Sec. III.B, Eq. 1): every searchable layer is a mixture of the
seven Table II blocks weighted by ``softmax(alpha)``. Both expose ``features(x)`` (the
network without its classifier: the encoder of the context auto-regression, Sec. III.C)
and ``forward(batch)`` (class logits).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from attnas.core.errors import ArchError, DataError
from attnas.ops.fullattn.self_attention_block import CANDIDATES, make_candidate

__all__ = [
    "LAYERS_PER_STAGE",
    "NUM_LAYERS",
    "STAGE_STRIDES",
    "STAGE_WIDTHS",
    "STEM_OP",
    "MixedLayer",
    "RelaxedStagewiseNetwork",
    "StagewiseNetwork",
    "image_tensor",
    "layer_layout",
]

STEM_OP = "local_sa_k3_h8"
STAGE_WIDTHS = (1, 2, 2, 4, 4)
STAGE_STRIDES = (1, 2, 1, 2, 1)
LAYERS_PER_STAGE = 3
NUM_LAYERS = len(STAGE_WIDTHS) * LAYERS_PER_STAGE


def layer_layout(init_channels: int) -> list[tuple[int, int, int]]:
    """``(in_channels, out_channels, stride)`` of the 15 searchable layers, in order."""
    layout = []
    c_in = init_channels
    for width, stride in zip(STAGE_WIDTHS, STAGE_STRIDES):
        c_out = width * init_channels
        for i in range(LAYERS_PER_STAGE):
            layout.append((c_in, c_out, stride if i == 0 else 1))
            c_in = c_out
    return layout


def image_tensor(batch: Any) -> Tensor:
    """The images ``[B, C, H, W]`` of a batch.

    Accepts the tensor itself, an ``(images, labels)`` tuple or list, or a mapping with
    an ``x``, ``image``, ``images`` or ``input`` entry.
    """
    if isinstance(batch, Tensor):
        x = batch
    elif isinstance(batch, (tuple, list)) and batch:
        x = batch[0]
    elif isinstance(batch, Mapping):
        key = next((k for k in ("x", "image", "images", "input") if k in batch), None)
        if key is None:
            raise DataError(f"image batch: no 'x', 'image', 'images' or 'input' entry among keys {sorted(batch)}")
        x = batch[key]
    else:
        raise DataError(f"image batch: expected a tensor, an (images, labels) pair or a mapping, got {type(batch).__name__}")
    if not isinstance(x, Tensor) or x.dim() != 4:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise DataError(f"image batch: expected images [B, C, H, W], got {shape}")
    return x


class _Backbone(nn.Module):
    """Shared head of both networks: global average pooling and a linear classifier."""

    def __init__(self, in_channels: int, num_classes: int, init_channels: int):
        super().__init__()
        self.in_channels, self.num_classes, self.init_channels = in_channels, num_classes, init_channels
        self.out_channels = STAGE_WIDTHS[-1] * init_channels
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(self.out_channels, num_classes)

    def features(self, x: Tensor) -> Tensor:  # pragma: no cover - implemented by subclasses
        raise NotImplementedError

    def _check(self, x: Tensor) -> None:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise DataError(f"{type(self).__name__} expects images [B, {self.in_channels}, H, W], got {tuple(x.shape)}")

    def classify(self, x: Tensor) -> Tensor:
        """Class logits ``[B, num_classes]`` of images ``x``."""
        return self.classifier(self.pool(self.features(x)).flatten(1))

    def forward(self, batch: Any) -> Tensor:
        return self.classify(image_tensor(batch))


class StagewiseNetwork(_Backbone):
    """One architecture of the stage-wise space (Zhou et al., 2021, Table I).

    Args:
        ops: The 15 searched blocks (names from :data:`CANDIDATES`), stage by stage.
        in_channels: Image channels.
        num_classes: Classifier outputs.
        init_channels: Channels of the stem and of stage 1.
        **block_options: ``reduction`` and ``batch_norm`` for
            :func:`~attnas.ops.fullattn.self_attention_block.make_candidate`.

    Shapes:
        - **input:** a batch holding images ``[B, in_channels, H, W]``
        - **output:** ``[B, num_classes]``; ``features``: ``[B, 4*init_channels, ceil(H/4), ceil(W/4)]``
    """

    def __init__(self, ops: Sequence[str], in_channels: int, num_classes: int, init_channels: int = 16,
                 **block_options: Any):
        super().__init__(in_channels, num_classes, init_channels)
        if len(ops) != NUM_LAYERS:
            raise ArchError(f"StagewiseNetwork needs {NUM_LAYERS} layer operations, got {len(ops)}")
        self.ops = tuple(ops)
        self.stem = make_candidate(STEM_OP, in_channels, init_channels, 1, **block_options)
        self.layers = nn.ModuleList(
            make_candidate(op, c_in, c_out, stride, **block_options)
            for op, (c_in, c_out, stride) in zip(ops, layer_layout(init_channels))
        )

    def features(self, x: Tensor) -> Tensor:
        """The feature map before pooling (the context auto-regression encoder)."""
        self._check(x)
        h = self.stem(x)
        for layer in self.layers:
            h = layer(h)
        return h


class MixedLayer(nn.Module):
    """A searchable layer relaxed as in DARTS (Zhou et al., 2021, Eq. 1).

    ``f(x) = sum_b softmax(alpha)_b * b(x)`` over the seven candidate blocks.

    Args:
        in_channels: Input channels.
        out_channels: Output channels.
        stride: Stride of the layer.
        **block_options: Passed to every candidate.

    Shapes:
        - **input:** ``x`` ``[B, in_channels, H, W]``, ``weights`` ``[len(CANDIDATES)]``
        - **output:** ``[B, out_channels, ceil(H/stride), ceil(W/stride)]``
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int, **block_options: Any):
        super().__init__()
        self.candidates = nn.ModuleList(
            make_candidate(name, in_channels, out_channels, stride, **block_options) for name in CANDIDATES
        )

    def forward(self, x: Tensor, weights: Tensor) -> Tensor:
        out = weights[0] * self.candidates[0](x)
        for w, op in zip(weights[1:], self.candidates[1:]):
            out = out + w * op(x)
        return out


class RelaxedStagewiseNetwork(_Backbone):
    """Continuous relaxation of the stage-wise space (Zhou et al., 2021, Sec. III.B, Eq. 1).

    Architecture parameters ``alpha`` (``[groups, 7]``, initialised to zero: "an equal
    amount of attention over all possible operations", Sec. IV.B) are kept apart from the
    network weights: :meth:`arch_parameters` and :meth:`weight_parameters` are disjoint.
    Layer ``l`` uses row ``layer_groups[l]`` of ``alpha``: one row per layer in the
    stage-wise space, or rows shared between layers (the Table VII ablation).

    Args:
        in_channels: Image channels.
        num_classes: Classifier outputs.
        init_channels: Channels of the stem and of stage 1.
        layer_groups: For each of the 15 layers, its row of ``alpha`` (default: its own).
        **block_options: ``reduction``, ``batch_norm``.

    Shapes:
        - **input:** a batch holding images ``[B, in_channels, H, W]``
        - **output:** ``[B, num_classes]``; ``features``: ``[B, 4*init_channels, ceil(H/4), ceil(W/4)]``
    """

    def __init__(self, in_channels: int, num_classes: int, init_channels: int = 16,
                 layer_groups: Sequence[int] | None = None, **block_options: Any):
        super().__init__(in_channels, num_classes, init_channels)
        groups = tuple(range(NUM_LAYERS)) if layer_groups is None else tuple(int(g) for g in layer_groups)
        if len(groups) != NUM_LAYERS or sorted(set(groups)) != list(range(max(groups) + 1)):
            raise ArchError(f"layer_groups must give each of the {NUM_LAYERS} layers a row 0..G-1, got {groups}")
        self.layer_groups = groups
        self.stem = make_candidate(STEM_OP, in_channels, init_channels, 1, **block_options)
        self.layers = nn.ModuleList(
            MixedLayer(c_in, c_out, stride, **block_options) for c_in, c_out, stride in layer_layout(init_channels)
        )
        self.alpha = nn.Parameter(torch.zeros(max(groups) + 1, len(CANDIDATES)))

    def arch_parameters(self) -> list[nn.Parameter]:
        """The architecture parameters (``alpha``)."""
        return [self.alpha]

    def weight_parameters(self) -> list[nn.Parameter]:
        """Every other parameter (the network weights)."""
        return [p for name, p in self.named_parameters() if name != "alpha"]

    def layer_weights(self) -> Tensor:
        """``softmax(alpha)`` expanded to the 15 layers: ``[15, 7]``."""
        return self.alpha.softmax(dim=-1)[list(self.layer_groups)]

    def features(self, x: Tensor) -> Tensor:
        """The feature map before pooling (the context auto-regression encoder)."""
        self._check(x)
        weights = self.layer_weights()
        h = self.stem(x)
        for layer, w in zip(self.layers, weights):
            h = layer(h, w)
        return h

    def derive_ops(self) -> list[str]:
        """The strongest candidate of every layer (argmax of ``alpha``, Sec. III.B)."""
        best = self.alpha.detach().argmax(dim=-1).tolist()
        return [CANDIDATES[best[g]] for g in self.layer_groups]

    def subnet_state_dict(self, ops: Sequence[str]) -> dict[str, Tensor]:
        """Weights of the discrete network ``ops`` taken from this relaxation.

        The result loads into ``StagewiseNetwork(ops, ...)`` built with the same options,
        so a derived architecture can start from the searched weights.
        """
        if len(ops) != NUM_LAYERS:
            raise ArchError(f"expected {NUM_LAYERS} layer operations, got {len(ops)}")
        out = {}
        for key, value in self.state_dict().items():
            if key == "alpha":
                continue
            if key.startswith("layers."):
                _, layer, _, cand, rest = key.split(".", 4)
                if CANDIDATES[int(cand)] != ops[int(layer)]:
                    continue
                key = f"layers.{layer}.{rest}"
            out[key] = value
        return out
