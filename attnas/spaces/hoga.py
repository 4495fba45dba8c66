"""The HOGA search space of AutoLA (Ma et al., NeurIPS 2020, Secs. 3.1-3.3).

An architecture is one HOGA cell: an attention operation on every edge of the order-``K``
DAG of Eq. 2. The same cell is placed after every residual block of the backbone (inside
the block, on the residual branch before the shortcut is added, as SE and CBAM are).

Choices layout (``Arch.choices``)::

    {
      "groups": 4,
      "edges": {
        "0-0": "identity",                                        # F_0 -> U_0
        "0-1": "norm_d1",    "1-1": "spatial_d1",                 # U_0 -> U_1, F_1 -> U_1
        "0-2": "norm_d1",    "1-2": "identity",  "2-2": "cbam",
        "0-3": "identity",   "1-3": "norm_d2",   "2-3": "spatial_d1", "3-3": "norm_d1"
      }
    }

``"groups"`` is ``K``; edge ``"j-k"`` (``0 <= j <= k < K``) feeds node ``U_k``: from the input
group ``F_k`` when ``j == k``, from node ``U_j`` when ``j < k``. There are ``K (K + 1) / 2``
edges; each names an operation of the space's pool (by default the nine of Sec. 3.2: ``se``,
``channel_v2``, ``spatial_d1``, ``spatial_d2``, ``norm_d1``, ``norm_d2``, ``cbam``,
``identity``, ``zero``; see :mod:`attnas.ops.autola.attention_modules`). The example is the cell of
the paper's Figure 3 (:data:`FIGURE3_EDGES`), with ``A_h (kernel 7)`` read as CBAM.

The space is ``|pool| ** (K (K + 1) / 2)`` cells large (``9 ** 10`` for the paper's setting).
The relaxed network (:meth:`HOGASpace.relaxed`) mixes the whole pool on every edge (Eq. 13)
with architecture weights shared by all cells; :meth:`HOGASpace.derive` keeps the most likely
operation per edge.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from attnas import registry
from attnas.config import CheckedConfig, PositiveInt
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError, did_you_mean
from attnas.models.hoga_networks import RelaxedHOGANetwork, hoga_factory
from attnas.models.image_classifier import ImageClassifier
from attnas.models.resnet_cifar import cifar_resnet
from attnas.ops.autola.attention_modules import HOGA_OPS, POOL
from attnas.ops.autola.hoga_cell import edge_key, edge_keys, hoga_edges
from attnas.registry import register_space
from attnas.spaces.base import Baseline, Space

#: The searched cell of the paper's Figure 3 (``A_1`` = identity, ``A_n`` = normalization,
#: ``A_s`` = spatial attention, ``A_h`` with kernel 7 = CBAM).
FIGURE3_EDGES: dict[str, str] = {
    "0-0": "identity",
    "0-1": "norm_d1", "1-1": "spatial_d1",
    "0-2": "norm_d1", "1-2": "identity", "2-2": "cbam",
    "0-3": "identity", "1-3": "norm_d2", "2-3": "spatial_d1", "3-3": "norm_d1",
}


@dataclass(frozen=True)
class HOGAConfig(CheckedConfig):
    """Options of the HOGA space.

    Attributes:
        backbone: The CIFAR ResNet the cell is searched and trained in (``resnet20`` in the
            paper's search; ``resnet29b``/``resnet56b`` have bottleneck blocks).
        width: First-stage channels of the backbone (16 on CIFAR-10, 64 on CIFAR-100).
        groups: ``K``, the number of channel groups (4 in the paper; 2 in its ablation).
        ops: The operation pool (order = column order of the architecture weights).
        reduction: Reduction ratio of the channel attention on the edges.
        phi_reduction: Reduction ratio of the channel attention in phi (Eq. 3).
        derive_without_zero: Ignore ``zero`` when taking the most likely operation of an edge,
            as DARTS and the authors' release do (every edge of Figure 3 is non-zero); set false
            for the literal Eq. 14 reading.
    """

    backbone: Literal["resnet20", "resnet32", "resnet56", "resnet110", "resnet29b", "resnet56b"] = "resnet20"
    width: PositiveInt = 16
    groups: PositiveInt = 4
    ops: tuple[str, ...] = HOGA_OPS
    reduction: PositiveInt = 4
    phi_reduction: PositiveInt = 16
    derive_without_zero: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        super().__post_init__()
        if self.width % self.groups:
            raise ConfigError(f"width: must be a positive multiple of groups ({self.groups}), got {self.width}")
        if not self.ops:
            raise ConfigError("ops: the operation pool is empty")
        dup = sorted({o for o in self.ops if self.ops.count(o) > 1})
        if dup:
            raise ConfigError(f"ops: listed more than once: {', '.join(dup)}")
        bad = [o for o in self.ops if not registry.is_registered("op", o, POOL)]
        if bad:
            known = registry.names("op", POOL)
            raise ConfigError(
                f"ops: unknown operation{'s' if len(bad) > 1 else ''} "
                + ", ".join(f"'{o}'{did_you_mean(o, known)}" for o in bad)
                + f"; valid: {', '.join(known)}"
            )


@register_space("hoga")
class HOGASpace(Space):
    """AutoLA's HOGA cell: an attention operation on each edge of a K-group DAG."""

    name = "hoga"
    Config = HOGAConfig
    capabilities = frozenset({"relaxed", "dag"})
    task_kinds = ("image",)

    # -- the architecture distribution ---------------------------------------------------------

    @property
    def edge_keys(self) -> list[str]:
        """Edge names ``"j-k"`` in canonical order."""
        return edge_keys(self.options.groups)

    def sample(self, rng: random.Random) -> Arch:
        """A cell with an operation drawn uniformly from the pool on every edge."""
        ops = self.options.ops
        return self.cell({k: rng.choice(ops) for k in self.edge_keys})

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        """Change the operation of one edge, chosen uniformly, to another operation."""
        self.validate(arch)
        if len(self.options.ops) < 2:
            raise ArchError("cannot mutate: the operation pool has a single operation")
        edges = dict(arch.choices["edges"])
        key = rng.choice(self.edge_keys)
        edges[key] = rng.choice([o for o in self.options.ops if o != edges[key]])
        return self.cell(edges)

    def cell(self, edges: dict[str, str], **meta: Any) -> Arch:
        """The architecture with operation ``edges[key]`` on each edge."""
        return self.arch({"groups": self.options.groups, "edges": dict(edges)}, **meta)

    def uniform(self, op: str) -> Arch:
        """The cell with ``op`` on every edge (HOG_SE / HOG_CBAM of Table 6)."""
        return self.cell({k: op for k in self.edge_keys})

    def validate(self, arch: Arch) -> None:
        """Check the layout, the number of groups, every edge and every operation name."""
        super().validate(arch)
        ch = arch.choices
        for key in ch:
            if key not in ("groups", "edges"):
                raise ArchError(f"choices: unknown key '{key}'; valid keys: edges, groups")
        for key in ("groups", "edges"):
            if key not in ch:
                raise ArchError(f"choices: missing key '{key}'")
        groups = ch["groups"]
        if isinstance(groups, bool) or not isinstance(groups, int):
            raise ArchError(f"choices.groups: expected an integer, got {groups!r}")
        if groups != self.options.groups:
            raise ArchError(f"choices.groups: the cell has {groups} groups but the space is configured with "
                            f"groups={self.options.groups} (set space.groups={groups})")
        edges = ch["edges"]
        if not isinstance(edges, dict):
            raise ArchError(f"choices.edges: expected a mapping from edge 'j-k' to an operation, got {edges!r}")
        keys = self.edge_keys
        extra = [k for k in edges if k not in keys]
        if extra:
            raise ArchError(f"choices.edges: unknown edge{'s' if len(extra) > 1 else ''} "
                            f"{', '.join(repr(k) for k in extra)}; a cell with {groups} groups has edges "
                            f"{', '.join(keys)}")
        missing = [k for k in keys if k not in edges]
        if missing:
            raise ArchError(f"choices.edges: missing edge{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        known = registry.names("op", POOL)
        unknown = [(k, o) for k, o in edges.items() if o not in known]
        if unknown:
            listed = ", ".join(f"'{o}' on edge {k}{did_you_mean(str(o), known)}" for k, o in unknown)
            raise ArchError(f"choices.edges: unknown operation{'s' if len(unknown) > 1 else ''} {listed}; "
                            f"valid: {', '.join(known)}")
        outside = [(k, o) for k, o in edges.items() if o not in self.options.ops]
        if outside:
            listed = ", ".join(f"'{o}' on edge {k}" for k, o in outside)
            raise ArchError(f"choices.edges: {listed} not in this space's operation pool "
                            f"(space.ops: {', '.join(self.options.ops)})")

    def size(self) -> int:
        """``|ops| ** (K (K + 1) / 2)``."""
        return len(self.options.ops) ** len(self.edge_keys)

    # -- networks ------------------------------------------------------------------------------

    def attention_factory(self, arch: Arch):
        """A ``channels -> HOGA`` factory of the cell ``arch`` (for any backbone)."""
        self.validate(arch)
        o = self.options
        return hoga_factory(arch.choices["edges"], o.groups, o.reduction, o.phi_reduction)

    def _backbone(self, task: Any, attn_layer) -> nn.Module:
        info = task.info
        return cifar_resnet(self.options.backbone, info.num_classes, info.in_dim, self.options.width, attn_layer)

    def build(self, arch: Arch, task: Any) -> nn.Module:
        """The backbone with the discrete cell ``arch`` in every residual block."""
        return ImageClassifier(self._backbone(task, self.attention_factory(arch)))

    def build_plain(self, task: Any) -> nn.Module:
        """The backbone without attention (the paper's first baseline row)."""
        return ImageClassifier(self._backbone(task, None))

    def relaxed(self, task: Any) -> RelaxedHOGANetwork:
        """The supernet: every edge of every cell mixes the whole pool (Eq. 13)."""
        o, info = self.options, task.info
        return RelaxedHOGANetwork(o.backbone, info.num_classes, info.in_dim, o.width, o.groups, o.ops,
                                  o.reduction, o.phi_reduction)

    def derive(self, relaxed: nn.Module) -> Arch:
        """The most likely operation of every edge of ``relaxed`` (Eqs. 14, 16).

        Eq. 16 writes ``argmin``; that is a slip for ``argmax`` (the text says "the most likely
        operation", and DARTS, whose relaxation this is, takes the argmax).
        """
        (alpha,) = relaxed.arch_parameters()
        ops = tuple(getattr(relaxed, "ops", self.options.ops))
        if ops != self.options.ops or tuple(alpha.shape) != (len(self.edge_keys), len(ops)):
            raise ArchError(f"the relaxed network's pool {ops} / weights {tuple(alpha.shape)} do not match the "
                            f"space (ops {self.options.ops}, {len(self.edge_keys)} edges)")
        probs = torch.softmax(alpha.detach().float().cpu(), dim=-1)
        scores = probs.clone()
        if self.options.derive_without_zero and "zero" in ops and len(ops) > 1:
            scores[:, ops.index("zero")] = -1.0
        best = scores.argmax(dim=-1).tolist()
        edges = {key: ops[i] for key, i in zip(self.edge_keys, best)}
        weights = {key: {op: round(float(p), 4) for op, p in zip(ops, row)}
                   for key, row in zip(self.edge_keys, probs.tolist())}
        return self.cell(edges, derived_from="argmax softmax(alpha)", edge_weights=weights)

    def alpha_arch(self, choice: list[int]) -> Arch:
        """The cell with operation ``ops[choice[r]]`` on edge ``r`` (the rows of ``alpha``)."""
        if len(choice) != len(self.edge_keys):
            raise ArchError(f"expected one column per edge ({len(self.edge_keys)}), got {len(choice)}")
        return self.cell({key: self.options.ops[i] for key, i in zip(self.edge_keys, choice)})

    def to_dag(self, arch: Arch) -> tuple[np.ndarray, list[str]]:
        """The cell as a node-labelled DAG in topological order.

        Node 0 is ``input`` (the block output ``F``); then one node per edge, in canonical
        edge order, labelled with its operation; the last node is ``output`` (phi). The
        operation of edge ``(k, k)`` reads the input; that of edge ``(j, k)``, ``j < k``, reads
        ``U_j``, i.e. every operation node of an edge into ``U_j``; every operation node feeds
        the output (all ``U_k`` are concatenated). ``zero`` edges are kept as nodes so every
        cell of a space has the same graph shape.
        """
        self.validate(arch)
        edges = hoga_edges(self.options.groups)
        index = {e: i + 1 for i, e in enumerate(edges)}
        n = len(edges) + 2
        adj = np.zeros((n, n), dtype=np.int64)
        for j, k in edges:
            node = index[(j, k)]
            if j == k:
                adj[0, node] = 1
            else:
                for i in range(j + 1):
                    adj[index[(i, j)], node] = 1
            adj[node, n - 1] = 1
        labels = ["input"] + [arch.choices["edges"][edge_key(j, k)] for j, k in edges] + ["output"]
        return adj, labels

    def draw(self, arch: Arch, path: str | Path, title: str = "") -> Path:
        """Draw the cell like AutoLA's Figure 3 (input groups, nodes, one labelled edge per operation) to a PNG."""
        from attnas.spaces._hoga_drawing import draw_hoga_cell

        self.validate(arch)
        return draw_hoga_cell(arch.choices["edges"], self.options.groups, path, title)

    def baselines(self) -> dict[str, Baseline]:
        """AutoLA's hand-designed rows (Tables 1 and 6): the plain ResNet, ResNet + SE and
        ResNet + CBAM (``resnet-attention`` space, reduction 16), and HOG_SE / HOG_CBAM, the
        HOGA cell with SE or CBAM on every edge."""
        o = self.options
        plain = {"name": "resnet-attention", "backbone": o.backbone, "width": o.width}
        out = {"plain": Baseline({"attention": "none"}, plain, f"plain {o.backbone}"),
               "se": Baseline({"attention": "se"}, plain, f"{o.backbone} + SE in every block"),
               "cbam": Baseline({"attention": "cbam"}, plain, f"{o.backbone} + CBAM in every block")}
        for op in ("se", "cbam"):
            if op in o.ops:
                edges = {key: op for key in edge_keys(o.groups)}
                out[f"hog_{op}"] = Baseline({"groups": o.groups, "edges": edges}, None,
                                            f"HOGA cell (K={o.groups}) with {op.upper()} on every edge")
        return out

    def describe(self, arch: Arch) -> str:
        """One line per target node: ``U_k = op(F_k) + op(U_j) + ...``."""
        self.validate(arch)
        edges = arch.choices["edges"]
        lines = [f"HOGA cell, K={self.options.groups} groups"]
        for k in range(self.options.groups):
            terms = [f"{edges[edge_key(j, k)]}({'F' if j == k else 'U'}_{j if j < k else k})" for j in range(k + 1)]
            lines.append(f"  U_{k} = " + " + ".join(terms))
        return "\n".join(lines)

