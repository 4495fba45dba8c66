"""The continuous relaxation of the HOGA cell for differentiable search (AutoLA Sec. 3.3).

Every edge ``(j, k)`` of the cell carries a mixed operation (AutoLA Eq. 13)::

    o_hat_jk(x) = sum_o softmax(alpha_jk)_o * o(x)

over the whole operation pool. :class:`MixedOp` is that sum written out, one module per
operation. :class:`RelaxedHOGA` holds the operations of several edges in a
:class:`GroupedMixedOp`, their weights stacked over edges (the ``K`` edges ``F_k -> U_k`` act on
disjoint channel groups of one tensor, and the edges leaving a node ``U_j`` all read the same
tensor), and computes the same sum edge by edge and operation by operation. The optional
kernel ``grouped_mixed_op`` (:mod:`attnas.kernels`) evaluates all edges of a
:class:`GroupedMixedOp` together: every operation of the pool is a gate, ``o(x) = g_o(x) * x``,
so the gates are summed first and ``x`` multiplied once, and the operations of a kind on all
edges run as one grouped convolution / one batched matrix product.

The architecture weights ``alpha`` (shape ``(edges, ops)``, canonical edge order of
:func:`~attnas.ops.autola.hoga_cell.hoga_edges`, columns in pool order) are a separate parameter,
initialised ``N(0, 1) * 1e-3`` as in AutoLA Sec. 4.2, and can be shared by many cells.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from attnas.core.errors import ConfigError, unknown_name
from attnas.ops.autola.attention_modules import HOGA_OPS, channel_gate, channel_pool, create_attention
from attnas.ops.autola.gate_pooling import mean
from attnas.ops.autola.hoga_cell import HOGA, HOGAProjection, check_divisible, edge_key, hoga_edges, project
from attnas.ops.autola.memory_format import as_nchw
from attnas.ops.autola.small_conv import small_conv2d
from attnas.ops.overrides import overridable

ALPHA_INIT_SCALE = 1e-3
_CHANNEL_FAMILIES = ("se", "channel_v2", "cbam")  # operations with a channel MLP
_SPATIAL = {"spatial_d1": 1, "spatial_d2": 2}
_NORM = {"norm_d1": 1, "norm_d2": 2}


def init_alpha(edges: int, ops: int, generator: torch.Generator | None = None) -> nn.Parameter:
    """Architecture weights ``N(0, 1) * 1e-3`` of shape ``(edges, ops)`` (AutoLA Sec. 4.2)."""
    return nn.Parameter(ALPHA_INIT_SCALE * torch.randn(edges, ops, generator=generator))


class MixedOp(nn.Module):
    """A mixed operation written out (AutoLA Eq. 13): ``sum_o w_o * o(x)``.

    The straightforward form, one module per operation; :class:`GroupedMixedOp` is the
    fast equivalent used by :class:`RelaxedHOGA`.

    Args:
        channels: Input channels.
        ops: Operation names from the ``hoga`` pool, or ready modules.
        reduction: Reduction ratio of channel attention.

    Shapes:
        - input: ``(B, C, H, W)`` and weights ``(len(ops),)``
        - output: ``(B, C, H, W)``
    """

    def __init__(self, channels: int, ops: Sequence[str | nn.Module], reduction: int = 4):
        super().__init__()
        self.ops = nn.ModuleList(create_attention(o, channels, reduction) if isinstance(o, str) else o for o in ops)

    def forward(self, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return sum(w * op(x) for w, op in zip(weights, self.ops))


class GroupedMixedOp(nn.Module):
    """``G`` mixed operations (Eq. 13) evaluated together, each with its own weights.

    Two arrangements occur in a HOGA cell:

    * ``shared_input=False``: ``G`` edges on the ``G`` channel groups of one tensor (the
      edges ``F_k -> U_k``); input ``(B, G * c, H, W)``;
    * ``shared_input=True``: ``G`` edges leaving one node (the edges ``U_j -> U_k``, ``k > j``);
      input ``(B, c, H, W)``, pooled statistics computed once for all of them.

    Edge ``g`` computes ``sum_o w[g, o] * o_g(x_g)`` (:meth:`operation`: each operation as its
    module computes it, with that edge's slice of the stacked weights). Parameters are stacked
    over edges; :meth:`export` returns the ordinary module of one edge's operation with the
    same weights.

    Args:
        groups: ``G``, the number of edges.
        channels: Channels ``c`` of each edge's input.
        ops: Operation names; must be from :data:`~attnas.ops.autola.attention_modules.HOGA_OPS`.
        reduction: Reduction ratio of the channel-attention MLPs.
        shared_input: Whether all edges read the same input (see above).

    Shapes:
        - input: ``(B, G * c, H, W)`` (or ``(B, c, H, W)`` when shared) and weights ``(G, len(ops))``
        - output: ``(B, G * c, H, W)``, edge ``g`` in channels ``g c .. (g + 1) c``
    """

    def __init__(self, groups: int, channels: int, ops: Sequence[str], reduction: int = 4,
                 shared_input: bool = False):
        super().__init__()
        for name in ops:
            if name not in HOGA_OPS:
                raise ConfigError(unknown_name("relaxed HOGA operation", name, HOGA_OPS))
        if len(set(ops)) != len(ops):
            raise ConfigError(f"operation pool lists an operation twice: {list(ops)}")
        self.groups, self.channels, self.ops, self.reduction = groups, channels, tuple(ops), reduction
        self.shared_input = shared_input
        self.index = {name: i for i, name in enumerate(self.ops)}
        # Reference modules give every stacked weight the initialisation of its own module.
        ref = {name: [create_attention(name, channels, reduction) for _ in range(groups)] for name in self.ops}

        self.families = [f for f in _CHANNEL_FAMILIES if f in self.index]
        if self.families:
            mlps = [[m.channel if f == "cbam" else m for m in ref[f]] for f in self.families]
            self.mlp1 = nn.Parameter(torch.stack([torch.stack([m.fc1.weight for m in ms]) for ms in mlps]).detach())
            self.mlp2 = nn.Parameter(torch.stack([torch.stack([m.fc2.weight for m in ms]) for ms in mlps]).detach())
            self._needs_max = any(f != "se" for f in self.families)
            # SE reads the average only; channel v2 and CBAM add the max branch (Eqs. 4, 5).
            self.register_buffer("_keep_max", torch.tensor([float(f != "se") for f in self.families]),
                                 persistent=False)
        if "cbam" in self.index:
            self.cbam_conv = nn.Parameter(torch.cat([m.spatial.conv.weight for m in ref["cbam"]]).detach())
            self._bn("cbam_bn", groups)

        self.spatial = [(n, d) for n, d in _SPATIAL.items() if n in self.index]
        for n, _ in self.spatial:
            setattr(self, f"{n}_conv", nn.Parameter(torch.cat([m.conv.weight for m in ref[n]]).detach()))
            self._bn(f"{n}_bn", groups)

        self.norm = [(n, d) for n, d in _NORM.items() if n in self.index]
        for n, _ in self.norm:
            setattr(self, f"{n}_weight", nn.Parameter(torch.cat([m.conv.weight for m in ref[n]]).detach()))
            setattr(self, f"{n}_bias", nn.Parameter(torch.cat([m.conv.bias for m in ref[n]]).detach()))

    def _bn(self, prefix: str, n: int) -> None:
        setattr(self, f"{prefix}_weight", nn.Parameter(torch.ones(n)))
        setattr(self, f"{prefix}_bias", nn.Parameter(torch.zeros(n)))
        self.register_buffer(f"{prefix}_mean", torch.zeros(n))
        self.register_buffer(f"{prefix}_var", torch.ones(n))

    @overridable("grouped_mixed_op")
    def forward(self, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """``sum_o w[g, o] o_g(x_g)`` for every edge ``g`` (Eq. 13), each operation as its module computes it."""
        c = self.channels
        edges = []
        for g in range(self.groups):
            xg = x if self.shared_input else x[:, g * c: (g + 1) * c]
            edges.append(sum(weights[g, i] * self.operation(g, name, xg) for i, name in enumerate(self.ops)))
        return torch.cat(edges, 1)

    def operation(self, g: int, name: str, x: torch.Tensor) -> torch.Tensor:
        """Operation ``name`` of edge ``g`` on ``x`` ``(B, c, H, W)``, with that edge's weights (Eqs. 4-8)."""
        if name == "identity":
            return x
        if name == "zero":
            return torch.zeros_like(x)
        if name in self.families:
            f = self.families.index(name)
            pooled = torch.stack((mean(x, (2, 3)), x.amax((2, 3)))) if name != "se" else mean(x, (2, 3))[None]
            x = x * channel_gate(pooled, self.mlp1[f, g], self.mlp2[f, g])[:, :, None, None]  # Eqs. 4, 5
            if name != "cbam":
                return x
            return x * self._spatial(g, "cbam", x, self.cbam_conv, 1)  # Eq. 8: then Eq. 6
        if name in _SPATIAL:
            return x * self._spatial(g, name, x, getattr(self, f"{name}_conv"), _SPATIAL[name])  # Eq. 6
        part = slice(g * self.channels, (g + 1) * self.channels)  # name in _NORM: Eq. 7
        weight, bias = getattr(self, f"{name}_weight")[part], getattr(self, f"{name}_bias")[part]
        return x * torch.sigmoid(small_conv2d(x, weight, bias, _NORM[name], self.channels))

    def _spatial(self, g: int, name: str, x: torch.Tensor, conv: torch.Tensor, dilation: int) -> torch.Tensor:
        """``sigmoid(BN(f_s([F^s_avg; F^s_max])))`` (Eq. 6) with edge ``g``'s filter and batch norm."""
        z = small_conv2d(channel_pool(x), conv[g: g + 1], None, dilation)
        one = slice(g, g + 1)
        return torch.sigmoid(F.batch_norm(z, getattr(self, f"{name}_bn_mean")[one], getattr(self, f"{name}_bn_var")[one],
                                          getattr(self, f"{name}_bn_weight")[one], getattr(self, f"{name}_bn_bias")[one],
                                          self.training, 0.1, 1e-5))

    @torch.no_grad()
    def export(self, group: int, name: str) -> nn.Module:
        """The ordinary module of operation ``name`` of edge ``group``, with its weights."""
        if name not in self.index:
            raise ConfigError(unknown_name("operation of this mixed op", name, self.ops))
        if not 0 <= group < self.groups:
            raise ConfigError(f"group {group} out of range 0..{self.groups - 1}")
        g, c = group, self.channels
        m = create_attention(name, c, self.reduction)
        if name in self.families:
            f = self.families.index(name)
            mlp = m.channel if name == "cbam" else m
            mlp.fc1.weight.copy_(self.mlp1[f, g])
            mlp.fc2.weight.copy_(self.mlp2[f, g])
        if name == "cbam":
            m.spatial.conv.weight.copy_(self.cbam_conv[g: g + 1])
            self._copy_bn(m.spatial.bn, "cbam_bn", slice(g, g + 1))
        if name in _SPATIAL:
            m.conv.weight.copy_(getattr(self, f"{name}_conv")[g: g + 1])
            self._copy_bn(m.bn, f"{name}_bn", slice(g, g + 1))
        if name in _NORM:
            part = slice(g * c, (g + 1) * c)
            m.conv.weight.copy_(getattr(self, f"{name}_weight")[part])
            m.conv.bias.copy_(getattr(self, f"{name}_bias")[part])
        m.train(self.training)
        return m

    def _copy_bn(self, bn: nn.BatchNorm2d, prefix: str, part: slice) -> None:
        bn.weight.copy_(getattr(self, f"{prefix}_weight")[part])
        bn.bias.copy_(getattr(self, f"{prefix}_bias")[part])
        bn.running_mean.copy_(getattr(self, f"{prefix}_mean")[part])
        bn.running_var.copy_(getattr(self, f"{prefix}_var")[part])


class RelaxedHOGA(nn.Module):
    """The HOGA cell with a mixed operation on every edge (AutoLA Eqs. 2, 3, 13).

    Args:
        channels: ``C``.
        groups: ``K``.
        ops: The operation pool (column order of ``alpha``).
        reduction: Reduction ratio of the edges' channel attention.
        phi_reduction: Reduction ratio of the channel attention in :math:`\\varphi`.
        alpha: Architecture weights ``(K (K + 1) / 2, len(ops))`` to share with other cells;
            a fresh ``N(0, 1) * 1e-3`` parameter when omitted.

    Shapes:
        - input: ``(B, C, H, W)``
        - output: ``(B, C, H, W)``
    """

    def __init__(self, channels: int, groups: int = 4, ops: Sequence[str] = HOGA_OPS, reduction: int = 4,
                 phi_reduction: int = 16, alpha: nn.Parameter | None = None):
        super().__init__()
        c = check_divisible(channels, groups)
        self.groups, self.group_channels, self.ops = groups, c, tuple(ops)
        self.reduction, self.phi_reduction = reduction, phi_reduction
        edges = hoga_edges(groups)
        self.edges = edges
        if alpha is None:
            alpha = init_alpha(len(edges), len(self.ops))
        if tuple(alpha.shape) != (len(edges), len(self.ops)):
            raise ConfigError(f"alpha has shape {tuple(alpha.shape)}, expected {(len(edges), len(self.ops))}")
        self.alpha = alpha
        row = {e: i for i, e in enumerate(edges)}
        self.diag = GroupedMixedOp(groups, c, self.ops, reduction)  # edges F_k -> U_k
        self.fanout = nn.ModuleList(GroupedMixedOp(groups - 1 - j, c, self.ops, reduction, shared_input=True)
                                    for j in range(groups - 1))  # edges U_j -> U_k, k > j
        self.register_buffer("_diag_rows", torch.tensor([row[(k, k)] for k in range(groups)]), persistent=False)
        for j in range(groups - 1):
            rows = torch.tensor([row[(j, k)] for k in range(j + 1, groups)])
            self.register_buffer(f"_fan_rows{j}", rows, persistent=False)
        self.phi = HOGAProjection((groups + 1) * c, channels, phi_reduction)

    def arch_weights(self) -> torch.Tensor:
        """``softmax(alpha)`` per edge, shape ``(edges, ops)`` (Eq. 13)."""
        return F.softmax(self.alpha, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.arch_weights()
        c, K = self.group_channels, self.groups
        like = x
        x = as_nchw(x)  # the gates work on NCHW planes (the gradient goes back in x's layout)
        diag = self.diag(x, w[self._diag_rows])
        acc: list[torch.Tensor] = list(diag.unflatten(1, (K, c)).unbind(1))  # unbind: one backward pass
        nodes: list[torch.Tensor] = []
        for j in range(K):
            u = acc[j]
            nodes.append(u)
            if j == K - 1:
                break
            out = self.fanout[j](u, w[getattr(self, f"_fan_rows{j}")]).unflatten(1, (K - 1 - j, c)).unbind(1)
            for i, k in enumerate(range(j + 1, K)):
                acc[k] = acc[k] + out[i]
        return project(self.phi, nodes, like)

    def locate(self, j: int, k: int) -> tuple[GroupedMixedOp, int]:
        """The grouped mixed operation and group that hold edge ``(j, k)``."""
        if not 0 <= j <= k < self.groups:
            raise ConfigError(f"no edge ({j}, {k}) in a cell with {self.groups} groups")
        return (self.diag, k) if j == k else (self.fanout[j], k - j - 1)

    def export_op(self, j: int, k: int, name: str) -> nn.Module:
        """The ordinary module of operation ``name`` on edge ``(j, k)``, with its weights."""
        mixed, g = self.locate(j, k)
        return mixed.export(g, name)

    @torch.no_grad()
    def discretize(self, edges: dict[str, str]) -> HOGA:
        """The discrete cell choosing ``edges[key]`` on every edge, weights copied from here."""
        cell = HOGA(self.groups * self.group_channels, edges, self.groups, self.reduction, self.phi_reduction)
        for j, k in self.edges:
            key = edge_key(j, k)
            cell.ops[key] = self.export_op(j, k, edges[key])
        cell.phi.load_state_dict(self.phi.state_dict())
        return cell.train(self.training)

