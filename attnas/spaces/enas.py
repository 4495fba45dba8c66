"""The ENAS macro search space (6 layers) as DAGs: the space of D-VAE's and Chatzianastasis et al.'s (2021) data.

Pham et al., *Efficient Neural Architecture Search via Parameter Sharing*, ICML 2018
(macro space); D-VAE (Zhang et al., NeurIPS 2019, Sec. 4) and Chatzianastasis et al. (2021, Sec. 4) use its
19,020 architectures with their weight-sharing CIFAR-10 accuracy
(:mod:`attnas.data.enas`).

A network is ``layers`` layers after an input (stem). Layer ``t`` (1-based) applies one
of six operations (3x3/5x5 convolution, 3x3/5x5 depthwise-separable convolution, 3x3
average and max pooling), always takes the output of vertex ``t - 1`` (the layer just
before, or the input for ``t = 1``) and any subset of the earlier vertices ``0..t-2`` as
skip connections; the last layer feeds the output.

``choices`` layout (``skips`` lists vertex indices: 0 is the input, ``j`` is layer ``j``)::

    {"layers": [{"op": "conv3", "skips": []},
                {"op": "sep5",  "skips": []},
                {"op": "max3",  "skips": [0]}, ...]}

:meth:`EnasSpace.to_dag` gives exactly the DAG D-VAE reads from the data file
(``input``, one vertex per layer labelled with its operation, ``output``), and
:meth:`EnasSpace.from_dag` is its inverse. attnas does not build the CIFAR-10 networks of
this space: their scores come from the measured table (task ``architecture-performance``),
so :meth:`EnasSpace.build` refuses.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import nn

from attnas.config import CheckedConfig, PositiveInt
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, UnsupportedError, unknown_name
from attnas.data.enas import VOCAB
from attnas.registry import register_space
from attnas.spaces.base import Space

#: The six operations, in the ENAS file's id order (0 = conv3, ..., 5 = max3).
OPS = VOCAB[2:]


@dataclass(frozen=True)
class EnasConfig(CheckedConfig):
    """Options of the ENAS macro space.

    Attributes:
        layers: Number of layers (the data file: 6).
    """

    layers: PositiveInt = 6

    field_prefix = "space."


@register_space("enas")
class EnasSpace(Space):
    """ENAS macro space: a chain of operations with skip connections (D-VAE's ENAS DAGs)."""

    name = "enas"
    Config = EnasConfig
    capabilities = frozenset({"dag"})
    task_kinds = ("architectures",)

    @property
    def n_layers(self) -> int:
        """Number of layers."""
        return self.options.layers

    def sample(self, rng: random.Random) -> Arch:
        """Every operation and every skip flag uniform and independent."""
        layers = []
        for t in range(1, self.n_layers + 1):
            layers.append({"op": rng.choice(OPS), "skips": [j for j in range(t - 1) if rng.random() < 0.5]})
        return self.arch({"layers": layers})

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        """Another operation for one layer, or one skip connection added or removed."""
        layers = [{"op": layer["op"], "skips": list(layer["skips"])} for layer in arch.choices["layers"]]
        t = rng.randrange(1, self.n_layers + 1)
        layer = layers[t - 1]
        if t < 2 or rng.random() < 0.5:
            layer["op"] = rng.choice([o for o in OPS if o != layer["op"]])
        else:
            j = rng.randrange(t - 1)
            layer["skips"] = sorted(set(layer["skips"]) ^ {j})
        return self.arch({"layers": layers})

    def validate(self, arch: Arch) -> None:
        """Check the layer count, every operation and every skip; the error names the first bad one."""
        super().validate(arch)
        layers = self.layer_list(arch, self.n_layers)
        for t, layer in enumerate(layers, start=1):
            if not isinstance(layer, dict) or set(layer) != {"op", "skips"}:
                raise ArchError(f"layer {t}: must be an object with keys 'op' and 'skips'")
            if layer["op"] not in OPS:
                raise ArchError(f"layer {t}: {unknown_name('operation', layer['op'], OPS)}")
            skips = layer["skips"]
            if not isinstance(skips, list) or any(isinstance(j, bool) or not isinstance(j, int) for j in skips):
                raise ArchError(f"layer {t}: skips must be a list of vertex indices, got {skips!r}")
            bad = [j for j in skips if not 0 <= j <= t - 2]
            if bad:
                raise ArchError(f"layer {t}: skip from vertex {bad[0]} out of range 0..{t - 2} "
                                f"(vertex {t - 1} is always connected)")
            if skips != sorted(set(skips)):
                raise ArchError(f"layer {t}: skips must be sorted and distinct, got {skips}")

    def size(self) -> int:
        """``6^n * 2^(n(n-1)/2)``: an operation per layer, a flag per earlier non-adjacent vertex."""
        n = self.n_layers
        return len(OPS) ** n * 2 ** (n * (n - 1) // 2)

    def describe(self, arch: Arch) -> str:
        """E.g. ``conv3 > sep5 > max3(+0) > ...`` (``+j``: skip from vertex j)."""
        parts = []
        for layer in arch.choices["layers"]:
            skips = ",".join(str(j) for j in layer["skips"])
            parts.append(f"{layer['op']}(+{skips})" if skips else layer["op"])
        return " > ".join(parts)

    # ---------------------------------------------------------------- DAGs

    def to_dag(self, arch: Arch) -> tuple[np.ndarray, list[str]]:
        """D-VAE's DAG of the architecture: ``input``, one vertex per layer, ``output``."""
        n = self.n_layers
        layers = arch.choices["layers"]
        adj = np.zeros((n + 2, n + 2), dtype=np.int64)
        for t, layer in enumerate(layers, start=1):
            adj[t - 1, t] = 1
            for j in layer["skips"]:
                adj[j, t] = 1
        adj[n, n + 1] = 1
        return adj, ["input", *(layer["op"] for layer in layers), "output"]

    def from_dag(self, adj: np.ndarray, labels: list[str]) -> Arch:
        """The architecture a DAG describes (the inverse of :meth:`to_dag`).

        Raises:
            ArchError: When the DAG is not one of this space (node count, labels, a missing
                chain edge, an edge into the output from anything but the last layer).
        """
        adj = np.asarray(adj)
        n = self.n_layers
        if len(labels) != n + 2 or adj.shape != (n + 2, n + 2):
            raise ArchError(f"DAG: an ENAS architecture of {n} layers has {n + 2} vertices, got {len(labels)} "
                            f"labels and adjacency {adj.shape}")
        if labels[0] != "input" or labels[-1] != "output":
            raise ArchError("DAG: must start with an 'input' vertex and end with an 'output' vertex")
        if np.any(np.tril(adj != 0)):
            raise ArchError("DAG: an edge goes against the vertex order")
        layers = []
        for t in range(1, n + 1):
            if labels[t] not in OPS:
                raise ArchError(f"DAG: vertex {t}: {unknown_name('operation', labels[t], OPS)}")
            if not adj[t - 1, t]:
                raise ArchError(f"DAG: layer {t} lacks its edge from vertex {t - 1}")
            layers.append({"op": labels[t], "skips": [j for j in range(t - 1) if adj[j, t]]})
            if t < n and adj[t, n + 1]:
                raise ArchError(f"DAG: layer {t} feeds the output; only the last layer does")
        if not adj[n, n + 1]:
            raise ArchError(f"DAG: the last layer {n} does not feed the output")
        arch = self.arch({"layers": layers})
        self.validate(arch)
        return arch

    def dag_vocabulary(self) -> list[str]:
        """Vertex labels in D-VAE's type order (input, output, then the operations by id)."""
        return list(VOCAB)

    def build(self, arch: Arch, task: Any) -> nn.Module:
        raise UnsupportedError(
            "space 'enas': attnas does not build ENAS CIFAR-10 networks; architectures of this space are "
            "scored from a table of measured accuracies (task 'architecture-performance')"
        )
