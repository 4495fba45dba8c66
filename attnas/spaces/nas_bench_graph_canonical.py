"""Canonical forms of NAS-Bench-Graph architectures: the key the benchmark's tables use.

Qin, Zhang, Zhang, Chen, Wang, Zhu, *NAS-Bench-Graph: Benchmarking Graph Neural
Architecture Search*, NeurIPS 2022 Datasets and Benchmarks. An architecture is a DAG of
four computing nodes: node ``i`` (0-based) reads ``links[i]`` (0: the input, ``j``: node
``j``'s output, ``links[i] <= i``) and applies ``ops[i]``. Many raw ``(links, ops)`` pairs
describe the same network; the benchmark measured one representative of each class and
keys its tables by an integer hash of that representative (``Arch.valid_hash`` of the
``nas-bench-graph`` package). :func:`canonical_code` computes the same integer in three
steps, as the package does:

1. **Relabel** the nodes so that the links are one of the nine patterns of :data:`LINKS`
   (:data:`_RELABEL`: new link pattern and which old node becomes each new node).
2. **Move skips**: a ``skip`` node with children, without a sibling, or whose output is
   the raw input is moved to the front (reading the input); its children are re-pointed
   at the skip's parent. Two link patterns this can produce are relabelled once more.
3. **Sort** the operations of interchangeable nodes (same parent, no children) by their
   position in :data:`OPS`.

The code is ``LINKS.index(links)`` followed by one base-10 digit per operation (its index
in :data:`OPS`). ``tests/spaces/test_nas_bench_graph_canonical.py`` checks it against the
package on every raw architecture.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The operations, in the benchmark's order (their digit in a code).
OPS = ("gat", "gcn", "gin", "cheb", "sage", "arma", "graph", "fc", "skip")

#: The five operations of the ``proteins`` table.
PROTEINS_OPS = ("gcn", "sage", "arma", "fc", "skip")

#: The nine canonical link patterns (their index is a code's leading digit).
LINKS = ((0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 1), (0, 0, 1, 2), (0, 0, 1, 3),
         (0, 1, 1, 1), (0, 1, 1, 2), (0, 1, 2, 2), (0, 1, 2, 3))

_OP_INDEX = {op: i for i, op in enumerate(OPS)}
_LINK_INDEX = {links: i for i, links in enumerate(LINKS)}

#: Step 1: a raw link pattern outside :data:`LINKS` -> (its canonical pattern, the old
#: node that becomes new node 0, 1, 2, 3).
_RELABEL = {
    (0, 0, 0, 2): ((0, 0, 0, 1), (1, 0, 2, 3)), (0, 0, 0, 3): ((0, 0, 0, 1), (2, 0, 1, 3)),
    (0, 0, 1, 0): ((0, 0, 0, 1), (0, 1, 3, 2)), (0, 0, 2, 0): ((0, 0, 0, 1), (1, 0, 3, 2)),
    (0, 0, 2, 1): ((0, 0, 1, 2), (1, 0, 2, 3)), (0, 0, 2, 2): ((0, 0, 1, 1), (1, 0, 2, 3)),
    (0, 0, 2, 3): ((0, 0, 1, 3), (1, 0, 2, 3)), (0, 1, 0, 0): ((0, 0, 0, 1), (0, 2, 3, 1)),
    (0, 1, 0, 1): ((0, 0, 1, 1), (0, 2, 1, 3)), (0, 1, 0, 2): ((0, 0, 1, 3), (0, 2, 1, 3)),
    (0, 1, 0, 3): ((0, 0, 1, 2), (0, 2, 1, 3)), (0, 1, 1, 0): ((0, 0, 1, 1), (0, 3, 1, 2)),
    (0, 1, 1, 3): ((0, 1, 1, 2), (0, 2, 1, 3)), (0, 1, 2, 0): ((0, 0, 1, 3), (0, 3, 1, 2)),
    (0, 1, 2, 1): ((0, 1, 1, 2), (0, 1, 3, 2)),
}

#: Step 2's last relabelling of the two patterns moving skips can leave.
_AFTER_SKIPS = {(0, 1, 2, 1): ((0, 1, 1, 2), (0, 1, 3, 2)), (0, 1, 1, 3): ((0, 1, 1, 2), (0, 2, 1, 3))}

#: Step 3: the positions whose operations are sorted, per link pattern.
_INTERCHANGEABLE = {(0, 0, 0, 0): (0, 1, 2, 3), (0, 0, 0, 1): (1, 2), (0, 0, 1, 1): (2, 3),
                    (0, 1, 1, 1): (1, 2, 3), (0, 1, 2, 2): (2, 3)}


def _relabel(links: tuple, ops: list, table: dict) -> tuple[tuple, list]:
    if links in table:
        links, order = table[links]
        ops = [ops[k] for k in order]
    return links, ops


def _reads_raw_input(node: int, links: list, ops: list) -> bool:
    """Whether every node on the path from ``node`` back to the input is a skip."""
    while node >= 0:
        if ops[node] != "skip":
            return False
        node = links[node] - 1
    return True


def _move_to_front(k: int, links: list, ops: list) -> tuple[list, list]:
    """Node ``k`` becomes node 0 reading the input, the nodes before it shift up by one, and
    its children read the node ``k`` read (renumbered)."""
    new_links = []
    for parent in links:
        if parent == k + 1:
            new_links.append(links[k] + 1)
        elif parent <= k:
            new_links.append(parent + 1)
        else:
            new_links.append(parent)
    return [0, *new_links[:k], *new_links[k + 1:]], [ops[k], *ops[:k], *ops[k + 1:]]


def _move_skips(links: list, ops: list) -> tuple[tuple, list]:
    for i in range(len(links)):
        if ops[i] != "skip":
            continue
        has_child = any(parent == i + 1 for parent in links)
        has_sibling = any(j != i and parent == links[i] for j, parent in enumerate(links))
        if has_child or not has_sibling or _reads_raw_input(i, links, ops):
            links, ops = _move_to_front(i, links, ops)
    return _relabel(tuple(links), ops, _AFTER_SKIPS)


def _sort_interchangeable(links: tuple, ops: list) -> list:
    ops = list(ops)
    if links == (0, 0, 1, 2):  # two chains of two nodes from the input: order the chains
        a, b, c, d = (_OP_INDEX[o] for o in ops)
        if a > b or (a == b and c > d):
            ops = [ops[1], ops[0], ops[3], ops[2]]
        return ops
    positions = _INTERCHANGEABLE.get(links)
    if positions:
        for pos, op in zip(positions, sorted((ops[p] for p in positions), key=_OP_INDEX.__getitem__)):
            ops[pos] = op
    return ops


def canonical_form(links: Sequence[int], ops: Sequence[str]) -> tuple[tuple, tuple]:
    """The representative ``(links, ops)`` the benchmark measured for this architecture.

    Args:
        links: Four parents, ``links[i]`` in ``0..i``.
        ops: Four operations of :data:`OPS`.
    """
    links, ops = _relabel(tuple(links), list(ops), _RELABEL)
    links, ops = _move_skips(list(links), ops)
    return links, tuple(_sort_interchangeable(links, ops))


def code_of(links: Sequence[int], ops: Sequence[str]) -> int:
    """The integer code of an already canonical ``(links, ops)``."""
    code = _LINK_INDEX[tuple(links)]
    for op in ops:
        code = code * 10 + _OP_INDEX[op]
    return code


def canonical_code(links: Sequence[int], ops: Sequence[str]) -> int:
    """The table key of an architecture (the package's ``Arch(links, ops).valid_hash()``)."""
    return code_of(*canonical_form(links, ops))


def decode(code: int) -> tuple[tuple, tuple]:
    """The canonical ``(links, ops)`` of a code (the inverse of :func:`code_of`)."""
    ops = []
    for _ in range(4):
        code, digit = divmod(code, 10)
        ops.append(OPS[digit])
    return LINKS[code], tuple(reversed(ops))
