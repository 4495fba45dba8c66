"""The NAS-Bench-Graph space: 26,206 GNN architectures of four computing nodes.

Qin et al., *NAS-Bench-Graph: Benchmarking Graph Neural Architecture Search*, NeurIPS 2022
Datasets and Benchmarks, Sec. 3.1. Node ``i`` (0-based) reads ``links[i]`` (0: the input,
``j``: node ``j``'s output, ``links[i] <= i``) and applies one of nine operations (GAT,
GCN, GIN, ChebNet, GraphSAGE, ARMA, k-GNN, a fully connected layer, skip); the nodes that
no other node reads are the cell's outputs. ``proteins`` was measured on five operations
(``operations: proteins``: gcn, sage, arma, fc, skip; 2,021 architectures).

``choices`` layout (any raw links are accepted; the benchmark's representative of the
architecture is :func:`~attnas.spaces.nas_bench_graph_canonical.canonical_form`)::

    {"links": [0, 0, 1, 2], "ops": ["gcn", "gat", "sage", "skip"]}

The architectures are scored from the benchmark's tables (task ``nas-bench-graph``), so
:meth:`NasBenchGraphSpace.build` refuses. The strategies that query tables work on
integer indices (:class:`ArchIndex`): position in the ascending list of codes, one-step
neighbours (one operation changed, or one node reading another earlier node) memoised.
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from torch import nn

from attnas.config import CheckedConfig
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, UnsupportedError, unknown_name
from attnas.registry import register_space
from attnas.spaces.base import Space
from attnas.spaces.nas_bench_graph_canonical import LINKS, OPS, PROTEINS_OPS, canonical_code, canonical_form, decode

_OP_SETS = {"all": OPS, "proteins": PROTEINS_OPS}


@functools.lru_cache(maxsize=None)
def _code(links: tuple, ops: tuple) -> int:
    return canonical_code(links, ops)


class ArchIndex:
    """The space's architectures as indices ``0..n-1`` (ascending code), with their neighbours.

    Args:
        operations: The operations of the space (:data:`OPS` or :data:`PROTEINS_OPS`).
    """

    def __init__(self, operations: tuple[str, ...]):
        self.operations = operations
        skip_only = ("skip",) * 4
        codes = {_code(links, ops) for links in LINKS for ops in itertools.product(operations, repeat=4)
                 if ops != skip_only}
        self.codes: list[int] = sorted(codes)
        self.position = {c: i for i, c in enumerate(self.codes)}
        self._neighbours: list[list[int] | None] = [None] * len(self.codes)

    def __len__(self) -> int:
        return len(self.codes)

    def index(self, links: Any, ops: Any) -> int:
        """The index of a raw architecture."""
        return self.position[_code(tuple(links), tuple(ops))]

    def neighbours(self, i: int) -> list[int]:
        """The distinct architectures one step from ``i``: one node's operation replaced, or one
        node (after the first) reading another earlier node; ascending, ``i`` excluded."""
        out = self._neighbours[i]
        if out is None:
            links, ops = decode(self.codes[i])
            found = set()
            for p in range(4):
                for op in self.operations:
                    if op != ops[p]:
                        new = (*ops[:p], op, *ops[p + 1:])
                        if new != ("skip",) * 4:
                            found.add(self.position[_code(links, new)])
                for parent in range(p + 1):
                    if parent != links[p]:
                        found.add(self.position[_code((*links[:p], parent, *links[p + 1:]), ops)])
            found.discard(i)
            out = self._neighbours[i] = sorted(found)
        return out


@functools.lru_cache(maxsize=None)
def arch_index(operations: str) -> ArchIndex:
    """The shared :class:`ArchIndex` of an operation set (``all`` or ``proteins``)."""
    return ArchIndex(_OP_SETS[operations])


@dataclass(frozen=True)
class NasBenchGraphConfig(CheckedConfig):
    """Options of the NAS-Bench-Graph space.

    Attributes:
        operations: ``all`` (nine operations, 26,206 architectures) or ``proteins`` (five,
            2,021: the operations the ``proteins`` table was measured on).
    """

    operations: Literal["all", "proteins"] = "all"

    field_prefix = "space."


@register_space("nas-bench-graph")
class NasBenchGraphSpace(Space):
    """NAS-Bench-Graph: four GNN nodes on a DAG, scored from the benchmark's tables."""

    name = "nas-bench-graph"
    Config = NasBenchGraphConfig
    capabilities = frozenset({"table", "dag"})
    task_kinds = ("table", "architectures")

    @property
    def index(self) -> ArchIndex:
        """The space's :class:`ArchIndex` (built on first use, shared in the process)."""
        return arch_index(self.options.operations)

    def arch_at(self, i: int) -> Arch:
        """The canonical architecture at index ``i``."""
        links, ops = decode(self.index.codes[i])
        return self.arch({"links": list(links), "ops": list(ops)})

    def index_of(self, arch: Arch) -> int:
        """The index of ``arch`` (its canonical form's)."""
        return self.index.index(arch.choices["links"], arch.choices["ops"])

    def sample(self, rng: random.Random) -> Arch:
        """Uniform over the distinct (canonical) architectures."""
        return self.arch_at(rng.randrange(len(self.index)))

    def mutate(self, arch: Arch, rng: random.Random) -> Arch:
        """A uniform one-step neighbour (:meth:`ArchIndex.neighbours`)."""
        return self.arch_at(rng.choice(self.index.neighbours(self.index_of(arch))))

    def validate(self, arch: Arch) -> None:
        """Four links ``0 <= links[i] <= i`` and four operations of the set, not all skip."""
        super().validate(arch)
        ch = arch.choices
        if set(ch) != {"links", "ops"}:
            raise ArchError(f"choices must have exactly the keys 'links' and 'ops', got {sorted(ch)}")
        links, ops = ch["links"], ch["ops"]
        if not isinstance(links, list) or len(links) != 4 or not isinstance(ops, list) or len(ops) != 4:
            raise ArchError("links and ops must be lists of 4 entries (one per computing node)")
        for i, parent in enumerate(links):
            if isinstance(parent, bool) or not isinstance(parent, int) or not 0 <= parent <= i:
                raise ArchError(f"links[{i}]: node {i} reads the input (0) or an earlier node (1..{i}), got {parent!r}")
        for i, op in enumerate(ops):
            if op not in self.index.operations:
                raise ArchError(f"ops[{i}]: {unknown_name('operation', op, self.index.operations)}")
        if all(op == "skip" for op in ops):
            raise ArchError("ops: an architecture of skips only is not in the benchmark")

    def size(self) -> int:
        """26,206 (``all``) or 2,021 (``proteins``) distinct architectures."""
        return len(self.index)

    def describe(self, arch: Arch) -> str:
        """E.g. ``0>gcn 0>gat 1>sage 2>skip`` (``j>op``: the node reads ``j``), canonical form."""
        links, ops = canonical_form(arch.choices["links"], arch.choices["ops"])
        return " ".join(f"{parent}>{op}" for parent, op in zip(links, ops))

    def to_dag(self, arch: Arch) -> tuple[np.ndarray, list[str]]:
        """``input``, the four nodes (canonical form), ``output`` (read from every unread node)."""
        links, ops = canonical_form(arch.choices["links"], arch.choices["ops"])
        adj = np.zeros((6, 6), dtype=np.int64)
        for i, parent in enumerate(links):
            adj[parent, i + 1] = 1
        for i in range(4):
            if i + 1 not in links:
                adj[i + 1, 5] = 1
        return adj, ["input", *ops, "output"]

    def dag_vocabulary(self) -> list[str]:
        """Vertex labels for graph VAEs: input, output, then the operations."""
        return ["input", "output", *self.index.operations]

    def from_dag(self, adj: np.ndarray, labels: list[str]) -> Arch:
        """The architecture a DAG describes (the inverse of :meth:`to_dag` up to canonical form).

        Raises:
            ArchError: When the DAG is not one of this space (six vertices, one parent per
                node among the earlier vertices, the output read from exactly the nodes no
                other node reads, the space's operations).
        """
        adj = np.asarray(adj) != 0
        if len(labels) != 6 or adj.shape != (6, 6) or labels[0] != "input" or labels[-1] != "output":
            raise ArchError(f"DAG: a NAS-Bench-Graph architecture is input, 4 nodes, output; got labels {list(labels)}")
        if np.any(np.tril(adj)):
            raise ArchError("DAG: an edge goes against the vertex order")
        links = []
        for i in range(4):
            parents = np.flatnonzero(adj[:i + 1, i + 1]).tolist()
            if len(parents) != 1:
                raise ArchError(f"DAG: node {i} must read exactly one earlier vertex, reads {parents}")
            links.append(parents[0])
        unread = [i + 1 for i in range(4) if i + 1 not in links]
        if np.flatnonzero(adj[:, 5]).tolist() != unread:
            raise ArchError(f"DAG: the output must read the nodes no node reads ({unread}), "
                            f"reads {np.flatnonzero(adj[:, 5]).tolist()}")
        arch = self.arch({"links": links, "ops": list(labels[1:5])})
        self.validate(arch)
        return arch

    def check_task(self, task: Any) -> None:
        """Refuse a task other than a table (``nas-bench-graph`` or ``architecture-performance`` on
        an ``nbg-*`` dataset), or a table without every architecture of the space (``proteins``
        with ``operations: all``)."""
        super().check_task(task)
        if hasattr(task, "rows"):
            task.rows(self.index.codes)

    def build(self, arch: Arch, task: Any) -> nn.Module:
        raise UnsupportedError("space 'nas-bench-graph': its architectures are scored from the benchmark's tables "
                               "(task 'nas-bench-graph'); attnas does not build their networks")
