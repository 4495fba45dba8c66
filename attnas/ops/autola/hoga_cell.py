"""The high order group attention (HOGA) cell of AutoLA (Ma et al., NeurIPS 2020, Sec. 3.1).

The block output ``F`` (``C`` channels) is split into ``K`` channel groups
``F_0 ... F_{K-1}`` of ``C / K`` channels. Node ``U_k`` of a small DAG is (Eq. 2)::

    U_k = o_kk(F_k) + sum_{j < k} o_jk(U_j)

and the cell's output is (Eq. 3)::

    U_hat = phi([U_0; ...; U_{K-1}; U_bar]),   U_bar = sum_i U_i

where ``phi`` is the learned mapping "by 1 x 1 convolutional layers and channel attention"
back to ``C`` channels (:class:`HOGAProjection`).

Edges are named ``"j-k"`` (``0 <= j <= k < K``): ``"k-k"`` is the edge from the input group
``F_k`` into ``U_k``; ``"j-k"`` with ``j < k`` is the edge from node ``U_j`` into ``U_k``. A
cell of order ``K`` has ``K (K + 1) / 2`` edges (10 for the paper's ``K = 4``), listed in the
canonical order of :func:`hoga_edges` (by target node, then source).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from attnas.core.errors import ArchError, ConfigError
from attnas.ops.autola.attention_modules import ChannelAttention, create_attention
from attnas.ops.autola.memory_format import is_channels_last, split_nchw
from attnas.ops.overrides import overridable


def hoga_edges(groups: int) -> list[tuple[int, int]]:
    """The edges ``(j, k)`` of an order-``groups`` cell in canonical order.

    Ordered by target ``k``, then source ``j = 0 .. k`` (``j == k``: from the input group ``F_k``).
    """
    if groups < 1:
        raise ConfigError(f"groups must be >= 1, got {groups}")
    return [(j, k) for k in range(groups) for j in range(k + 1)]


def edge_key(j: int, k: int) -> str:
    """The name ``"j-k"`` of edge ``(j, k)``."""
    return f"{j}-{k}"


def edge_keys(groups: int) -> list[str]:
    """The edge names of an order-``groups`` cell in canonical order."""
    return [edge_key(j, k) for j, k in hoga_edges(groups)]


def check_divisible(channels: int, groups: int) -> int:
    """``channels // groups``; raises ``ConfigError`` when ``groups`` does not divide ``channels``."""
    if groups < 1 or channels % groups:
        raise ConfigError(f"HOGA: {channels} channels cannot be split into {groups} equal groups")
    return channels // groups


class HOGAProjection(nn.Module):
    r"""The mapping :math:`\varphi` of AutoLA Eq. 3.

    ``1 x 1`` convolution ``(K + 1) C / K -> C``, batch norm, ReLU, ``1 x 1`` convolution
    ``C -> C``, batch norm, then channel attention (Eq. 4) on the result -- "1 x 1
    convolutional layers and channel attention", arranged as in the authors' release.

    Args:
        in_channels: ``(K + 1) * C / K``.
        channels: ``C``.
        reduction: Reduction ratio of the channel attention.

    Shapes:
        - input: ``(B, in_channels, H, W)``
        - output: ``(B, channels, H, W)``
    """

    def __init__(self, in_channels: int, channels: int, reduction: int = 16):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.attn = ChannelAttention(channels, reduction)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._after_conv1(self.conv1(x))

    def project(self, nodes: Sequence[torch.Tensor], channels_last: bool = False) -> torch.Tensor:
        r"""``forward(aggregate(nodes))`` without forming :math:`\bar U` or the ``(K + 1) c`` concatenation.

        The first ``1 x 1`` convolution is linear, so its weights on the :math:`\bar U = \sum_i U_i`
        channels can be added to the weights of every node: ``conv1([U_0; ...; U_{K-1}; U_bar])
        = conv1'([U_0; ...; U_{K-1}])`` with ``W'_k = W_k + W_bar``. The same function (up to
        float rounding), a ``C -> C`` instead of a ``(K + 1) C / K -> C`` convolution, and no
        pass to sum the nodes. Gradients reach ``conv1.weight`` through the folding.

        Args:
            nodes: ``U_0 ... U_{K-1}``, each ``(B, C / K, H, W)``.
            channels_last: Whether the cell's input is channels-last (a hint: an accelerated
                implementation may return the projection in that format).

        Returns:
            The projection, ``(B, C, H, W)``.
        """
        c = nodes[0].shape[1]
        k = len(nodes)
        w = self.conv1.weight
        if w.shape[1] != (k + 1) * c:
            raise ConfigError(f"phi expects {w.shape[1]} input channels, got {k} nodes of {c} channels (+ their sum)")
        return self._folded(nodes, channels_last)

    @overridable("hoga_phi")
    def _folded(self, nodes: Sequence[torch.Tensor], channels_last: bool = False) -> torch.Tensor:
        """:meth:`project` after its check: ``conv1'`` with the folded weights, then the rest of phi."""
        c, k, w = nodes[0].shape[1], len(nodes), self.conv1.weight
        folded = w[:, : k * c] + w[:, k * c:].repeat(1, k, 1, 1)
        return self._after_conv1(F.conv2d(torch.cat(list(nodes), 1), folded))

    def _after_conv1(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(x))
        return self.attn(self.bn2(self.conv2(x)))


def aggregate(nodes: list[torch.Tensor]) -> torch.Tensor:
    """``[U_0; ...; U_{K-1}; U_bar]`` with ``U_bar = sum_i U_i`` (Eq. 3), along channels."""
    total = nodes[0]
    for u in nodes[1:]:
        total = total + u
    return torch.cat([*nodes, total], 1)


def project(phi: nn.Module, nodes: list[torch.Tensor], like: torch.Tensor | None = None) -> torch.Tensor:
    """``phi(aggregate(nodes))`` (Eq. 3); through :meth:`HOGAProjection.project` when ``phi`` is one.

    ``like``: the cell's input (its memory format is a hint to accelerated implementations).
    """
    if isinstance(phi, HOGAProjection):
        return phi.project(nodes, like is not None and is_channels_last(like))
    return phi(aggregate(nodes))


class HOGA(nn.Module):
    """A discrete HOGA cell: one attention operation on every edge (AutoLA Eqs. 2-3).

    Args:
        channels: ``C``, the channels of the block output it attends to.
        edges: Operation name (from the ``hoga`` pool) of every edge ``"j-k"``.
        groups: ``K``, the number of channel groups (the attention order).
        reduction: Reduction ratio of the channel-attention operations on the edges.
        phi_reduction: Reduction ratio of the channel attention in :math:`\\varphi`.

    Shapes:
        - input: ``(B, C, H, W)``
        - output: ``(B, C, H, W)``

    Example::

        cell = HOGA(64, {"0-0": "identity", "0-1": "norm_d1", "1-1": "spatial_d1"}, groups=2)
    """

    def __init__(self, channels: int, edges: Mapping[str, str], groups: int = 4, reduction: int = 4,
                 phi_reduction: int = 16):
        super().__init__()
        c = check_divisible(channels, groups)
        keys = edge_keys(groups)
        missing = [k for k in keys if k not in edges]
        extra = [k for k in edges if k not in keys]
        if missing or extra:
            raise ArchError(
                f"HOGA with {groups} groups needs exactly the edges {', '.join(keys)}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unexpected {', '.join(map(str, extra))}" if extra else "")
            )
        self.groups, self.group_channels = groups, c
        self.choices = {k: edges[k] for k in keys}
        self.ops = nn.ModuleDict({k: create_attention(edges[k], c, reduction) for k in keys})
        self.phi = HOGAProjection((groups + 1) * c, channels, phi_reduction)

    def edges_into(self, k: int) -> list[tuple[int, str, str]]:
        """``(j, key, operation)`` of the present edges into node ``U_k``: every ``"j-k"`` whose
        operation is not ``zero`` (an absent edge), ``j = 0 .. k`` (``j == k``: from ``F_k``)."""
        keys = [(j, edge_key(j, k)) for j in range(k + 1)]
        return [(j, key, self.choices[key]) for j, key in keys if self.choices[key] != "zero"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Nodes ``U_k = o_kk(F_k) + sum_{j<k} o_jk(U_j)`` (Eq. 2), then ``phi`` of them and their sum (Eq. 3)."""
        inputs = split_nchw(x, self.group_channels)  # F_0 ... F_{K-1}, NCHW (the gradient goes back in x's layout)
        nodes: list[torch.Tensor] = []
        for k in range(self.groups):
            u = None
            for j, key, _ in self.edges_into(k):
                y = self.ops[key](inputs[k] if j == k else nodes[j])
                u = y if u is None else u + y
            nodes.append(torch.zeros_like(inputs[k]) if u is None else u)
        return project(self.phi, nodes, x)
