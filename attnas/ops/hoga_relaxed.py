"""The continuous relaxation of the HOGA cell for differentiable search (AutoLA Sec. 3.3).

Every edge ``(j, k)`` of the cell carries a mixed operation (AutoLA Eq. 13)::

    o_hat_jk(x) = sum_o softmax(alpha_jk)_o * o(x)

over the whole operation pool. :class:`MixedOp` is that sum written out, one module per
operation. :class:`RelaxedHOGA` computes the same function faster with
:class:`GroupedMixedOp`, which exploits two facts:

* every operation of the pool is a gate, ``o(x) = g_o(x) * x`` (identity: ``g = 1``, zero:
  ``g = 0``), so a mixed edge is ``x * sum_o w_o g_o(x)``: the gates, most of them small
  (``(B, C, 1, 1)`` or ``(B, 1, H, W)``), are summed first and ``x`` is multiplied once;
  pooled statistics are computed once per input and shared by the operations that use them;
* the ``K`` edges ``F_k -> U_k`` act on disjoint channel groups of one tensor, and the edges
  leaving a node ``U_j`` all read the same tensor, so the operations of a kind on all those
  edges run as one grouped convolution / one batched matrix product with stacked weights.

The architecture weights ``alpha`` (shape ``(edges, ops)``, canonical edge order of
:func:`~attnas.ops.hoga_cell.hoga_edges`, columns in pool order) are a separate parameter,
initialised ``N(0, 1) * 1e-3`` as in AutoLA Sec. 4.2, and can be shared by many cells.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from attnas.errors import ConfigError, unknown_name
from attnas.ops.hoga_cell import HOGA, HOGAProjection, aggregate, check_divisible, edge_key, hoga_edges
from attnas.ops.vision_attention import HOGA_OPS, create_attention

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
    """``G`` independent mixed operations (Eq. 13) on the ``G`` channel groups of one tensor.

    Group ``g`` computes ``sum_o w[g, o] * o_g(x_g)`` with its own weights for every
    operation ``o``; all groups and all operations of a kind are evaluated together.
    Parameters are stored stacked over groups; :meth:`export` returns the ordinary module
    of one group's operation with the same weights.

    Args:
        groups: ``G``.
        channels: Channels ``c`` of each group.
        ops: Operation names; must be from :data:`~attnas.ops.vision_attention.HOGA_OPS`.
        reduction: Reduction ratio of the channel-attention MLPs.

    Shapes:
        - input: ``(B, G * c, H, W)`` and weights ``(G, len(ops))``
        - output: ``(B, G * c, H, W)``
    """

    def __init__(self, groups: int, channels: int, ops: Sequence[str], reduction: int = 4):
        super().__init__()
        for name in ops:
            if name not in HOGA_OPS:
                raise ConfigError(unknown_name("relaxed HOGA operation", name, HOGA_OPS))
        if len(set(ops)) != len(ops):
            raise ConfigError(f"operation pool lists an operation twice: {list(ops)}")
        self.groups, self.channels, self.ops, self.reduction = groups, channels, tuple(ops), reduction
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
            sp = [m.spatial for m in ref["cbam"]]
            self.cbam_kernel = sp[0].kernel_size
            self.cbam_conv = nn.Parameter(torch.cat([s.conv.weight for s in sp]).detach())  # (G, 2, k, k)
            self._bn("cbam_bn", groups)

        self.spatial = [(n, d) for n, d in _SPATIAL.items() if n in self.index]
        if self.spatial:  # kernel of op s in group g at row g * S + s
            self.sp_conv = nn.Parameter(torch.cat([ref[n][g].conv.weight for g in range(groups)
                                                   for n, _ in self.spatial]).detach())  # (G * S, 2, 3, 3)
            self._bn("sp_bn", groups * len(self.spatial))

        self.norm = [(n, d) for n, d in _NORM.items() if n in self.index]
        for n, _ in self.norm:
            setattr(self, f"{n}_weight", nn.Parameter(torch.cat([m.conv.weight for m in ref[n]]).detach()))
            setattr(self, f"{n}_bias", nn.Parameter(torch.cat([m.conv.bias for m in ref[n]]).detach()))

    def _bn(self, prefix: str, n: int) -> None:
        setattr(self, f"{prefix}_weight", nn.Parameter(torch.ones(n)))
        setattr(self, f"{prefix}_bias", nn.Parameter(torch.zeros(n)))
        self.register_buffer(f"{prefix}_mean", torch.zeros(n))
        self.register_buffer(f"{prefix}_var", torch.ones(n))

    def _batch_norm(self, prefix: str, z: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(z, getattr(self, f"{prefix}_mean"), getattr(self, f"{prefix}_var"),
                            getattr(self, f"{prefix}_weight"), getattr(self, f"{prefix}_bias"),
                            self.training, 0.1, 1e-5)

    def _spatial_kernel(self) -> tuple[torch.Tensor, int]:
        """The spatial operations' dilated kernels embedded in one ``(G * S, 2, k, k)`` kernel."""
        dmax = max(d for _, d in self.spatial)
        size = 2 * dmax + 1
        S = len(self.spatial)
        if S == 1:
            return self.sp_conv, dmax
        small = self.sp_conv.reshape(self.groups, S, 2, 3, 3)
        big = small.new_zeros(self.groups, S, 2, size, size)
        for s, (_, d) in enumerate(self.spatial):
            big[:, s, :, dmax - d: dmax + d + 1: d, dmax - d: dmax + d + 1: d] = small[:, s]
        return big.reshape(-1, 2, size, size), dmax

    def forward(self, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        B, _, H, W = x.shape
        G, c = self.groups, self.channels
        xg = x.reshape(B, G, c, H, W)
        col = {name: weights[:, i] for i, name in enumerate(self.ops)}  # (G,) each
        chan = col["identity"][None, :, None] if "identity" in col else None  # (B|1, G, c|1)
        spat = None  # (B, G, H, W)
        full = None  # (B, G, c, H, W)

        if self.families:
            avg = xg.mean((3, 4))
            pooled = torch.stack((avg, xg.amax((3, 4)))) if self._needs_max else avg[None]
            hid = torch.relu(torch.einsum("sbgc,fghc->sfbgh", pooled, self.mlp1))
            logits = torch.einsum("sfbgh,fgch->sfbgc", hid, self.mlp2)
            if self._needs_max:
                logits = logits[0] + logits[1] * self._keep_max[:, None, None, None]
            else:
                logits = logits[0]
            sig = torch.sigmoid(logits)  # (F, B, G, c)
            mix = torch.stack([col[f] if f != "cbam" else torch.zeros_like(col[f]) for f in self.families])
            c_gate = torch.einsum("fbgc,fg->bgc", sig, mix)
            chan = c_gate if chan is None else c_gate + chan
            if "cbam" in col:
                gc = sig[self.families.index("cbam")]  # (B, G, c)
                y = xg * gc[..., None, None]
                ps = torch.stack((y.mean(2), y.amax(2)), 2).reshape(B, 2 * G, H, W)
                k = self.cbam_kernel
                z = F.conv2d(ps, self.cbam_conv, padding=k // 2, groups=G)
                gs = torch.sigmoid(self._batch_norm("cbam_bn", z))  # (B, G, H, W)
                full = (gc * col["cbam"][None, :, None])[..., None, None] * gs[:, :, None]

        if self.spatial:
            S = len(self.spatial)
            ps = torch.stack((xg.mean(2), xg.amax(2)), 2).reshape(B, 2 * G, H, W)
            kernel, pad = self._spatial_kernel()
            dil = self.spatial[0][1] if S == 1 else 1
            z = F.conv2d(ps, kernel, padding=pad, dilation=dil, groups=G)  # (B, G * S, H, W)
            s_gate = torch.sigmoid(self._batch_norm("sp_bn", z)).reshape(B, G, S, H, W)
            w_sp = torch.stack([col[n] for n, _ in self.spatial], 1)  # (G, S)
            spat = torch.einsum("bgshw,gs->bghw", s_gate, w_sp)

        for n, d in self.norm:
            z = F.conv2d(x, getattr(self, f"{n}_weight"), getattr(self, f"{n}_bias"), padding=d, dilation=d,
                         groups=G * c)
            g = torch.sigmoid(z).reshape(B, G, c, H, W)
            term = g * col[n][None, :, None, None, None]
            full = term if full is None else full + term

        gate = full
        if chan is not None:
            gate = chan[..., None, None] if gate is None else gate + chan[..., None, None]
        if spat is not None:
            gate = spat[:, :, None] if gate is None else gate + spat[:, :, None]
        if gate is None:  # a pool of only "zero"
            return torch.zeros_like(x)
        return (xg * gate).reshape(B, G * c, H, W)

    @torch.no_grad()
    def export(self, group: int, name: str) -> nn.Module:
        """The ordinary module of operation ``name`` of group ``group``, with its weights."""
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
            S = len(self.spatial)
            row = g * S + [n for n, _ in self.spatial].index(name)
            m.conv.weight.copy_(self.sp_conv[row: row + 1])
            self._copy_bn(m.bn, "sp_bn", slice(row, row + 1))
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
        self.fanout = nn.ModuleList(GroupedMixedOp(groups - 1 - j, c, self.ops, reduction)
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
        B, C, H, W = x.shape
        K, c = self.groups, self.group_channels
        diag = self.diag(x, w[self._diag_rows]).reshape(B, K, c, H, W)
        acc: list[torch.Tensor] = [diag[:, k] for k in range(K)]
        nodes: list[torch.Tensor] = []
        for j in range(K):
            u = acc[j]
            nodes.append(u)
            n = K - 1 - j
            if n == 0:
                continue
            src = torch.cat([u] * n, 1) if n > 1 else u
            out = self.fanout[j](src, w[getattr(self, f"_fan_rows{j}")]).reshape(B, n, c, H, W)
            for i, k in enumerate(range(j + 1, K)):
                acc[k] = acc[k] + out[:, i]
        return self.phi(aggregate(nodes))

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

