"""AutoAttend networks (:class:`~attnas.spaces.autoattend.AutoAttendSpace`): the context-aware
supernet and the standalone model.

Both run the same computation (:meth:`_AutoAttendBase.run`):

1. a domain *stem* maps the batch to the input layer ``h_0`` and a context (graph edges,
   padding masks) shared by all operations;
2. layer ``t`` applies each of its connections' operation to its source layer (with
   dropout on the operation's input) and aggregates: the *addition* layer sums, the
   *attention* layer runs Eq. 8 on (Query, Key, Value);
3. a domain *head* maps the last layer to the task's output.

With ``space.block: residual`` each layer is a pre-norm residual block (Platonov et al.,
ICLR 2023; :mod:`attnas.models.residual_blocks`): the operations read ``LayerNorm(h_s)``
and layer ``t`` adds ``Dropout(W_t a_t + b_t)`` to ``h_{t-1}``.

Only the layers the last layer depends on are computed.

Context-aware parameter sharing (Sec. 4.2.2): the supernet keeps one module per
(source layer, target layer, operation, context), where the context is the source
layer's type (``input``, ``add``, ``attn``) and the connection's role at the target
(``add``, or ``q``/``k``/``v`` of an attention layer): the 8 contexts of the paper (plus
the input layer, whose type never varies). The ablation variants of Sec. 5.4.2 drop
parts of the key: ``nc`` neither, ``sc`` the source type only, ``tc`` the target role
only, ``fc`` both. All modules are created up front, so the optimiser and the
checkpoint see a fixed set of parameters; parameters of operations not in the sampled
architecture get no gradient and are not updated by the optimiser.

Layer widths: layer 0 is the stem's output (the raw input with ``stem: raw``), the last
layer is the class scores with ``head: none``, every other layer is ``hidden`` wide; a
connection's operation maps its source layer's width to its target layer's.

The networks are built from an :class:`AutoAttendNetworkConfig`: plain values (sizes,
the sharing variant, the operations, the dropouts) and the domain's :class:`NetworkParts`,
which make the stem, head, attention and operations of a domain (graphs, text). The space
builds that config (:func:`attnas.spaces.autoattend_networks.network_config`, which picks
the parts by the task's kind); this module never looks a space up.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from attnas.core.arch import Arch
from attnas.models.residual_blocks import PreNormResidual
from attnas.ops.shared.dropout import fast_dropout

#: The roles of a layer type's inputs: an addition layer's two inputs, an attention layer's
#: query, key and value.
ROLES = {"add": ("add", "add"), "attn": ("q", "k", "v")}
#: The operation that stands for an absent connection.
ZERO = "zero"

@runtime_checkable
class NetworkParts(Protocol):
    """The modules of one domain (graphs, text) an AutoAttend network is made of.

    Attributes:
        input_dropout: Dropout on each operation's input.
        add_dropout: Dropout on the sum of an *addition* layer.
        per_layer_attention: One attention module per layer instead of one shared module
            (for attention layers with parameters, e.g. a LayerNorm after Eq. 8); the
            supernet keeps one per layer position, shared by all architectures, like the stem.
    """

    def stem(self) -> nn.Module:
        """Maps a batch to ``(h_0, context)``."""

    def head(self) -> nn.Module:
        """Maps ``(h_last, context)`` to the task's output."""

    def attention(self) -> nn.Module:
        """The attention layer's aggregation ``(q, k, v, context) -> h`` (Eq. 8)."""

    def op(self, name: str, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        """Operation ``name`` from ``in_dim`` to ``out_dim`` features (``last``: into the last layer)."""


@dataclass(frozen=True)
class AutoAttendNetworkConfig:
    """What an AutoAttend network is built from (made by the space for one task).

    Attributes:
        layers: Number of searchable layers.
        hidden: Width of the hidden layers.
        in_dim: Width of the raw input (layer 0 with ``raw_input``).
        num_classes: Width of the output (the last layer with ``scores_output``).
        raw_input: Layer 0 is the raw input (``stem: raw``), not ``hidden`` wide.
        scores_output: The last layer holds the class scores (``head: none``).
        context: The context-aware sharing variant (``fc``, ``sc``, ``tc``, ``nc``).
        layer_types: The layer types the space allows (``add``, ``attn``).
        ops: The operations of the space's pool (the supernet holds one module of each
            per connection and context; ``zero`` and ``identity`` have none).
        input_dropout: Dropout on each operation's input.
        add_dropout: Dropout on the sum of an *addition* layer.
        per_layer_attention: One attention module per layer (see :class:`NetworkParts`).
        parts: The domain's modules.
        residual: Wrap the layers in pre-norm residual blocks
            (:class:`~attnas.models.residual_blocks.PreNormResidual`; ``space.block: residual``).
    """

    layers: int
    hidden: int
    in_dim: int
    num_classes: int
    raw_input: bool
    scores_output: bool
    context: str
    layer_types: tuple[str, ...]
    ops: tuple[str, ...]
    input_dropout: float
    add_dropout: float
    per_layer_attention: bool
    parts: NetworkParts
    residual: bool = False

    def widths(self) -> list[int]:
        """The width of every layer, 0 (the stem's output) to ``layers`` (the head's input)."""
        first = self.in_dim if self.raw_input else self.hidden
        last = self.num_classes if self.scores_output else self.hidden
        return [first] + [self.hidden] * (self.layers - 1) + [last]


def _src_type(s: int, layers: list[dict]) -> str:
    return "input" if s == 0 else layers[s - 1]["type"]


def context_key(s: int, t: int, op: str, src_type: str, role: str, sharing: str) -> str:
    """The supernet module name a connection uses under a sharing variant."""
    src = src_type if sharing in ("sc", "fc") else "any"
    tgt = role if sharing in ("tc", "fc") else "any"
    return f"s{s}_t{t}_{op}_{src}_{tgt}"


def plan(arch: Arch, sharing: str, residual: bool = False) -> tuple:
    """Compile ``arch`` into the steps :meth:`_AutoAttendBase.run` executes (with ``residual``
    blocks every layer needs the one before it).

    Returns:
        A tuple over layers of ``(t, type, needed, ((slot, source, op, key), ...))``.
    """
    layers = arch.choices["layers"]
    n = len(layers)
    needed = [False] * (n + 1)
    needed[n] = True
    for t in range(n, 0, -1):
        if needed[t]:
            needed[t - 1] = needed[t - 1] or residual
            for conn in layers[t - 1]["inputs"]:
                if conn["op"] != ZERO:
                    needed[conn["source"]] = True
    steps = []
    for t, layer in enumerate(layers, start=1):
        conns = []
        for slot, (role, conn) in enumerate(zip(ROLES[layer["type"]], layer["inputs"])):
            s, op = conn["source"], conn["op"]
            conns.append((slot, s, op, context_key(s, t, op, _src_type(s, layers), role, sharing)))
        steps.append((t, layer["type"], needed[t], tuple(conns)))
    return tuple(steps)


class _AutoAttendBase(nn.Module):
    def __init__(self, config: AutoAttendNetworkConfig):
        super().__init__()
        self.config = config
        parts = config.parts
        self.stem = parts.stem()
        self.head = parts.head()
        self.per_layer_attention = config.per_layer_attention
        # per layer: filled by the subclasses with the layers that can be attention layers
        self.attention = nn.ModuleDict() if self.per_layer_attention else parts.attention()
        self.p = config.input_dropout
        self.add_p = config.add_dropout
        self.widths = config.widths()
        #: Platonov et al.'s pre-norm residual blocks around the layers (None: plain layers)
        self.blocks = PreNormResidual(self.widths, config.input_dropout) if config.residual else None

    def make_op(self, op: str, s: int, t: int) -> nn.Module:
        """The module of operation ``op`` on a connection from layer ``s`` to layer ``t``."""
        return self.config.parts.op(op, self.widths[s], self.widths[t], last=(t == self.config.layers))

    def _attention(self, t: int) -> nn.Module:
        return self.attention[str(t)] if self.per_layer_attention else self.attention

    def _module(self, t: int, slot: int, key: str, op: str) -> nn.Module:
        raise NotImplementedError

    def _read(self, s: int, h: torch.Tensor, inputs: dict[int, torch.Tensor]) -> torch.Tensor:
        """What the operations reading layer ``s`` see: ``h`` (with residual blocks its
        ``LayerNorm_s``), after dropout (the stem already dropped layer 0's), computed once."""
        if s not in inputs:
            if self.blocks is not None:
                h = self.blocks.norm(s, h)
            inputs[s] = h if s == 0 else fast_dropout(h, self.p, self.training)
        return inputs[s]

    def run(self, batch: Any, steps: tuple) -> torch.Tensor:
        h0, ctx = self.stem(batch)
        hs: list[torch.Tensor | None] = [h0]
        dropped: dict[int, torch.Tensor] = {}
        for t, ltype, needed, conns in steps:
            if not needed:
                hs.append(None)
                continue
            outs = []
            for slot, s, op, key in conns:
                if op == ZERO:
                    outs.append(None)
                    continue
                if op == "identity":
                    outs.append(hs[s] if self.blocks is None else self.blocks.norm(s, hs[s]))
                else:
                    outs.append(self._module(t, slot, key, op)(self._read(s, hs[s], dropped), ctx))
            if ltype == "add":
                present = [o for o in outs if o is not None]
                # reduce, not sum(): no extra 0 + present[0] pass (the same values)
                h = reduce(operator.add, present) if present else self._zeros(h0, t)
                h = fast_dropout(h, self.add_p, self.training)
            else:
                q, k, v = (o if o is not None else self._zeros(h0, t) for o in outs)
                h = self._attention(t)(q, k, v, ctx)
            if self.blocks is not None:
                h = self.blocks.update(t, hs[t - 1], h)
            hs.append(h)
        return self.head(hs[-1] if self.blocks is None else self.blocks.norm(len(steps), hs[-1]), ctx)

    def _zeros(self, h0: torch.Tensor, t: int) -> torch.Tensor:
        """Layer ``t``'s zero output (h0 may be sparse, or another width)."""
        return torch.zeros(*h0.shape[:-1], self.widths[t], dtype=h0.dtype, device=h0.device)


class AutoAttendSupernet(_AutoAttendBase):
    """The one-shot supernet; ``forward(batch, arch)`` runs the sub-architecture ``arch``.

    Args:
        config: What the network is built from (:meth:`AutoAttendSpace.supernet
            <attnas.spaces.autoattend.AutoAttendSpace.supernet>` makes it for a task).
    """

    def __init__(self, config: AutoAttendNetworkConfig):
        super().__init__(config)
        opts = config
        self.sharing = opts.context
        self.ops = nn.ModuleDict()
        n = opts.layers
        src_types = {0: ["input"], **{s: list(opts.layer_types) for s in range(1, n)}}
        roles = []
        if "add" in opts.layer_types:
            roles.append("add")
        if "attn" in opts.layer_types:
            roles += ["q", "k", "v"]
        #: every module's key -> the first key of its connection and operation (for :meth:`share_contexts`)
        self._shared_key: dict[str, str] = {}
        for t in range(1, n + 1):
            for s in range(t):
                for op in opts.ops:
                    if op in (ZERO, "identity"):
                        continue
                    first = None
                    for st in src_types[s]:
                        for role in roles:
                            key = context_key(s, t, op, st, role, self.sharing)
                            if key not in self.ops:
                                self.ops[key] = self.make_op(op, s, t)
                            first = first or key
                            self._shared_key[key] = first
        if self.per_layer_attention and "attn" in opts.layer_types:
            for t in range(1, n + 1):
                self.attention[str(t)] = opts.parts.attention()
        self._plans: OrderedDict[str, tuple] = OrderedDict()
        self.contexts_shared = False

    def share_contexts(self, shared: bool) -> None:
        """While ``shared``, every context of a connection and operation uses one module (the
        no-context sharing of Sec. 5.4.2): a warm-up that gives each module the updates of all
        its contexts (``strategy.supernet.context_warmup``)."""
        if shared != self.contexts_shared:
            self.contexts_shared = shared
            self._plans.clear()

    @torch.no_grad()
    def split_contexts(self) -> None:
        """End of the warm-up: every context's module starts from its shared module's weights."""
        self.share_contexts(False)
        for key, first in self._shared_key.items():
            if key != first:
                self.ops[key].load_state_dict(self.ops[first].state_dict())

    def plan(self, arch: Arch) -> tuple:
        """The compiled plan of ``arch`` (memoised for the last 4096 architectures)."""
        k = arch.key()
        p = self._plans.get(k)
        if p is None:
            p = plan(arch, self.sharing, self.blocks is not None)
            if self.contexts_shared:
                p = tuple((t, ltype, needed, tuple((slot, s, op, self._shared_key.get(key, key))
                                                   for slot, s, op, key in conns))
                          for t, ltype, needed, conns in p)
            self._plans[k] = p
            if len(self._plans) > 4096:
                self._plans.popitem(last=False)
        return p

    def _module(self, t: int, slot: int, key: str, op: str) -> nn.Module:
        return self.ops[key]

    def forward(self, batch: Any, arch: Arch) -> torch.Tensor:
        return self.run(batch, self.plan(arch))

    def parameters_of(self, arch: Arch) -> list[nn.Parameter]:
        """The parameters the sub-architecture ``arch`` uses (for counting)."""
        params = list(self.stem.parameters()) + list(self.head.parameters())
        if self.blocks is not None:
            params += list(self.blocks.parameters())
        if not self.per_layer_attention:
            params += list(self.attention.parameters())
        for t, ltype, needed, conns in self.plan(arch):
            if needed and ltype == "attn" and self.per_layer_attention:
                params += list(self.attention[str(t)].parameters())
            if needed:
                for _, _, op, key in conns:
                    if key in self.ops:
                        params += list(self.ops[key].parameters())
        return params


class AutoAttendModel(_AutoAttendBase):
    """A standalone AutoAttend network of one architecture; ``forward(batch)``.

    Args:
        config: What the network is built from (:meth:`AutoAttendSpace.build
            <attnas.spaces.autoattend.AutoAttendSpace.build>` makes it for a task).
        arch: The architecture (validated).
    """

    def __init__(self, config: AutoAttendNetworkConfig, arch: Arch):
        super().__init__(config)
        self.arch_doc = arch.to_dict()
        self.steps = plan(arch, config.context, config.residual)
        self.ops = nn.ModuleDict()
        for t, ltype, needed, conns in self.steps:
            if not needed:
                continue
            if ltype == "attn" and self.per_layer_attention:
                self.attention[str(t)] = config.parts.attention()
            for slot, s, op, _ in conns:
                if op not in (ZERO, "identity"):
                    self.ops[f"L{t}_{slot}"] = self.make_op(op, s, t)

    def _module(self, t: int, slot: int, key: str, op: str) -> nn.Module:
        return self.ops[f"L{t}_{slot}"]

    def forward(self, batch: Any) -> torch.Tensor:
        """The task's output for one batch; what the batch is depends on the task:

        - node classification: a graph with ``x``, float ``[N, in_dim]`` node features, and
          ``edge_index``, int64 ``[2, E]`` edges (source row, target row): a torch_geometric
          ``Data``/``Batch`` or the task's ``NodeBatch``; returns ``[N, classes]`` logits;
        - text classification: a :class:`~attnas.tasks.text_classification.TextBatch`
          (``tokens`` int64 ``[B, L]`` vocabulary ids, ``mask`` bool ``[B, L]`` True at real
          tokens, ``lengths`` int64 ``[B]``); returns ``[B, classes]`` logits.

        :mod:`attnas.export.model_inputs` wraps the model to take these as plain tensors.
        """
        return self.run(batch, self.steps)

    def latency_parts(self, batch: Any) -> list[tuple[list, Callable[[], Any]]]:
        """The parts of the forward pass on ``batch`` whose times add up to its latency
        (``costs.latency: operations``, :mod:`attnas.costs.measure`): the stem, every operation,
        every layer's merge (attention or sum) and the head, each as ``(signature, run)``.

        A signature names what the part's time depends on: the operation and its widths
        (an operation reading the stem's output is marked ``input``: it may be sparse), so
        parts of other architectures with the same signature share one measurement.
        ``run()`` runs the part on inputs of the right shape (the stem's real output; random
        hidden states drawn once from a fixed generator, the values do not change the
        time). Call it in eval mode without autograd, as the latency is measured.
        """
        h0, ctx = self.stem(batch)
        gen = torch.Generator(device=h0.device).manual_seed(0)
        states: dict[int, torch.Tensor] = {}

        def state(s: int) -> Any:
            if s == 0:
                return h0
            if s not in states:
                states[s] = torch.randn(*h0.shape[:-1], self.widths[s], generator=gen, device=h0.device)
            return states[s]

        parts: list[tuple[list, Callable[[], Any]]] = [(["stem"], lambda: self.stem(batch))]
        blocks = self.blocks
        if blocks is not None:  # every layer's LayerNorm (0..n, the last one the head's) and update
            parts.append((["norm", self.widths[0]], lambda: blocks.norm(0, h0)))
        for t, ltype, needed, conns in self.steps:
            if not needed:
                continue
            present = 0
            for slot, s, op, _ in conns:
                if op == ZERO:
                    continue
                present += 1
                if op != "identity":
                    module, x = self.ops[f"L{t}_{slot}"], state(s)
                    parts.append((["op", op, "input" if s == 0 else self.widths[s], self.widths[t], t == len(self.steps)],
                                  lambda module=module, x=x: module(x, ctx)))
            h = state(t)
            if ltype == "add":
                parts.append((["add", present, self.widths[t]],
                              lambda n=present, h=h: reduce(operator.add, [h] * n) if n else torch.zeros_like(h)))
            else:
                attention = self._attention(t)
                zeros = len(conns) - present
                parts.append((["attention", zeros, self.widths[t]],
                              lambda attention=attention, h=h, zeros=zeros, t=t: attention(
                                  *([h] * (3 - zeros) + [self._zeros(h0, t) for _ in range(zeros)]), ctx)))
            if blocks is not None:
                parts.append((["residual", self.widths[t]], lambda t=t, h=h: blocks.update(t, h, h)))
                parts.append((["norm", self.widths[t]], lambda t=t, h=h: blocks.norm(t, h)))
        h_last = state(len(self.steps))
        parts.append((["head", self.widths[-1]], lambda: self.head(h_last, ctx)))
        return parts

    @torch.no_grad()
    def load_from_supernet(self, supernet: AutoAttendSupernet) -> None:
        """Copy the shared weights this architecture inherits from ``supernet``."""
        shared = ("stem", "head") + (() if self.blocks is None else ("blocks",))
        for name in shared + (() if self.per_layer_attention else ("attention",)):
            getattr(self, name).load_state_dict(getattr(supernet, name).state_dict())
        for t, module in self.attention.items() if self.per_layer_attention else ():
            module.load_state_dict(supernet.attention[t].state_dict())
        for t, _, needed, conns in self.steps:
            if not needed:
                continue
            for slot, _, op, key in conns:
                if op not in (ZERO, "identity"):
                    self.ops[f"L{t}_{slot}"].load_state_dict(supernet.ops[key].state_dict())
