"""The AutoAttend search space: layers, connections, addition and attention layers.

Guan et al., *AutoAttend: Automated Attention Representation Search*, ICML 2021, Sec. 4.1.

A network is ``n`` layers after an input layer 0. Layer ``t`` (1-based) is either an
*addition* layer, which sums two incoming connections, or an *attention* layer, which
takes three connections as Query, Key and Value and applies multi-head scaled dot-product
attention (Eq. 4 and 8). Every connection picks a source layer in ``0..t-1`` and a
primitive operation from the pool. Constraints of Sec. 4.1.3, each switchable:

1. *Skeleton*: the first input of an addition layer and the Query of an attention layer
   come from the previous layer ``t-1``.
2. Key and Value of an attention layer share their source layer.
3. Skeleton operations and all three attention connections are non-zero.

With all three, the space has ``prod_k (b(b-1)k + (b-1)^3 k)`` architectures; without any,
``prod_k (k^2 b^2 + k^3 b^3)`` (b = pool size, k = layer index); :meth:`AutoAttendSpace.size`
computes the count for any subset of constraints.

``choices`` layout (attention inputs are in Query, Key, Value order)::

    {"layers": [
        {"type": "add",  "inputs": [{"source": 0, "op": "gcn"}, {"source": 0, "op": "zero"}]},
        {"type": "attn", "inputs": [{"source": 1, "op": "gat_4"}, {"source": 0, "op": "sage"},
                                    {"source": 0, "op": "linear"}]}
    ]}

How a network meets the data (``stem`` and ``head``, graphs only): with ``stem: raw``
the layer-1 operations read the raw node features (Sec. 5.2.1: the pool's graph
convolutions are the network's layers) instead of a shared linear projection of them,
and with ``head: none`` the last layer's operations output the class scores instead of
feeding a shared linear classifier, so the space holds GCN and GAT exactly as they are
(``L1=add(0:gcn, 0:zero) L2=add(1:gcn, 0:zero)`` is Kipf & Welling's GCN). ``identity``
changes no width, so it is not a choice where the widths differ: on connections from
the raw input, and into a last layer that outputs the classes.

The options are :class:`~attnas.spaces.autoattend_config.AutoAttendConfig`. The networks
themselves (supernet with context-aware parameter sharing, standalone model) are in
:mod:`attnas.models.autoattend_network`, built from the plain config that
:func:`attnas.spaces.autoattend_networks.network_config` makes; what they look like in each
domain (graph, text) is a domain adapter chosen by the task's kind.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
from torch import nn

from attnas import registry
from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError, unknown_name
from attnas.models.autoattend_network import ROLES, ZERO, AutoAttendModel, AutoAttendSupernet
from attnas.registry import register_space
from attnas.spaces.autoattend_config import AutoAttendConfig
from attnas.spaces.autoattend_networks import adapter_for, network_config
from attnas.spaces.base import Baseline, Space

LAYER_TYPES = ("add", "attn")
IDENTITY = "identity"


#: GCN's training protocol (Kipf & Welling, ICLR 2017, Sec. 5.3: Adam, lr 0.01, weight
#: decay 5e-4), trained until its validation accuracy stops improving (a patience of 100
#: epochs, at most 1,000; kept weights: the best validation accuracy, as every row of
#: ``attnas compare``): after the paper's 200 epochs the best validation accuracy was still
#: in the last 20 epochs on 7 of 9 Cora trainings, i.e. not converged in this harness.
GCN_PROTOCOL = {"epochs": 1000, "lr": 0.01, "weight_decay": 5e-4, "patience": 100, "optimizer": "adam",
                "scheduler": "none"}
#: GAT's training protocol (Velickovic et al., ICLR 2018, Sec. 3.3: Adam, lr 0.005, weight
#: decay 5e-4 on Cora and CiteSeer, early stopping with a patience of 100 epochs; at most
#: 1,000 epochs here, where its validation curve is long flat).
GAT_PROTOCOL = {"epochs": 1000, "lr": 0.005, "weight_decay": 5e-4, "patience": 100, "optimizer": "adam",
                "scheduler": "none"}


@register_space("autoattend")
class AutoAttendSpace(Space):
    """AutoAttend: addition/attention layers with searched connections (Guan et al., 2021)."""

    name = "autoattend"
    Config = AutoAttendConfig
    capabilities = frozenset({"one-shot", "dag", "contexts"})

    def __init__(self, options: AutoAttendConfig | None = None):
        super().__init__(options)
        opts = self.options
        pool = registry.names("op", opts.pool)
        if not pool:
            pools = sorted({e.group for e in registry.entries("op")})
            raise ConfigError(unknown_name("space.pool", opts.pool, pools))
        if opts.ops:
            for op in opts.ops:
                if op not in pool:
                    raise ConfigError(f"space.ops: {unknown_name(f'operation in pool {opts.pool!r}', op, pool)}")
            if len(set(opts.ops)) != len(opts.ops):
                raise ConfigError(f"space.ops: repeated operations in {list(opts.ops)}")
            self.ops: tuple[str, ...] = tuple(opts.ops)
        else:
            self.ops = tuple(o for o in pool if o not in ("self_attention",))
        self.nonzero_ops = tuple(o for o in self.ops if o != ZERO)
        if not self.nonzero_ops and 3 in opts.constraints:
            raise ConfigError("space.ops: constraint 3 needs at least one non-zero operation")
        if (opts.stem == "raw" or opts.head == "none") and not set(self.nonzero_ops) - {IDENTITY}:
            raise ConfigError(f"space.ops: stem '{opts.stem}' / head '{opts.head}' need an operation that changes "
                              f"the width (identity cannot), got {list(self.ops)}")
        self.c1, self.c2, self.c3 = (c in opts.constraints for c in (1, 2, 3))

    # ---------------------------------------------------------------- the choice structure

    @property
    def n_layers(self) -> int:
        """Number of searchable layers."""
        return self.options.layers

    def _is_skeleton(self, ltype: str, slot: int) -> bool:
        return self.c1 and slot == 0

    def identity_allowed(self, t: int, source: int) -> bool:
        """Whether ``identity`` can connect layer ``source`` to layer ``t``: only where the
        widths agree (not from the raw input, not into a last layer of class scores)."""
        if source == 0 and self.options.stem == "raw":
            return False
        return not (t == self.n_layers and self.options.head == "none")

    def _op_choices(self, ltype: str, slot: int, t: int, source: int) -> tuple[str, ...]:
        nonzero = self.c3 and (ltype == "attn" or self._is_skeleton(ltype, slot))
        ops = self.nonzero_ops if nonzero else self.ops
        if IDENTITY in ops and not self.identity_allowed(t, source):
            ops = tuple(o for o in ops if o != IDENTITY)
        return ops

    def _source_choices(self, t: int, ltype: str, slot: int, k_source: int | None = None) -> tuple[int, ...]:
        if self._is_skeleton(ltype, slot):
            return (t - 1,)
        if ltype == "attn" and slot == 2 and self.c2:
            return (k_source,)
        return tuple(range(t))

    def _sample_layer(self, t: int, rng: random.Random, ltype: str | None = None) -> dict:
        ltype = ltype or rng.choice(self.options.layer_types)
        inputs = []
        for slot in range(len(ROLES[ltype])):
            k_src = inputs[1]["source"] if slot == 2 else None
            src = rng.choice(self._source_choices(t, ltype, slot, k_src))
            inputs.append({"source": src, "op": rng.choice(self._op_choices(ltype, slot, t, src))})
        return {"type": ltype, "inputs": inputs}

    def sample(self, rng: random.Random) -> Arch:
        """Draw from the prior Γ(A): every decision uniform among its valid options.

        Layer type, then each connection's source and operation, are drawn uniformly
        among the choices the constraints leave (SPOS-style uniform sampling).
        """
        return self.arch({"layers": [self._sample_layer(t, rng) for t in range(1, self.n_layers + 1)]})

    def mutate(self, arch: Arch, rng: random.Random, max_tries: int = 100) -> Arch:
        """Change one layer (Sec. 5.2.3): another operation, source layer or layer type.

        The result is always valid and differs from ``arch``.
        """
        layers = arch.choices["layers"]
        for _ in range(max_tries):
            t = rng.randrange(1, self.n_layers + 1)
            layer = layers[t - 1]
            kind = rng.choice(("op", "source", "type"))
            new = self._mutate_layer(t, layer, kind, rng)
            if new is not None and new != layer:
                out = [dict(layer_) for layer_ in layers]
                out[t - 1] = new
                cand = self.arch({"layers": out})
                self.validate(cand)
                return cand
        raise ArchError("mutation found no different valid architecture (is the space a single point?)")

    def _mutate_layer(self, t: int, layer: dict, kind: str, rng: random.Random) -> dict | None:
        ltype = layer["type"]
        inputs = [dict(c) for c in layer["inputs"]]
        if kind == "op":
            slot = rng.randrange(len(inputs))
            options = [o for o in self._op_choices(ltype, slot, t, inputs[slot]["source"]) if o != inputs[slot]["op"]]
            if not options:
                return None
            inputs[slot]["op"] = rng.choice(options)
        elif kind == "source":
            slots = [s for s in range(len(inputs)) if len(self._source_choices(t, ltype, s, inputs[1]["source"] if
                                                                                  len(inputs) > 1 else None)) > 1]
            if not slots:
                return None
            slot = rng.choice(slots)
            options = [s for s in range(t) if s != inputs[slot]["source"]]
            if not options:
                return None
            inputs[slot]["source"] = rng.choice(options)
            if ltype == "attn" and slot == 1 and self.c2:
                inputs[2]["source"] = inputs[1]["source"]
            for i, conn in enumerate(inputs):  # an operation the new source does not admit is drawn again
                allowed = self._op_choices(ltype, i, t, conn["source"])
                if conn["op"] not in allowed:
                    conn["op"] = rng.choice(allowed)
        else:  # another layer type: keep what can be kept, draw the rest
            others = [x for x in self.options.layer_types if x != ltype]
            if not others:
                return None
            new_type = rng.choice(others)
            fresh = self._sample_layer(t, rng, new_type)
            for slot, conn in enumerate(fresh["inputs"][: len(inputs)]):
                old = inputs[slot]
                k_src = fresh["inputs"][1]["source"] if slot == 2 else None
                if old["source"] in self._source_choices(t, new_type, slot, k_src):
                    conn["source"] = old["source"]
                if old["op"] in self._op_choices(new_type, slot, t, conn["source"]):
                    conn["op"] = old["op"]
            if new_type == "attn" and self.c2:
                fresh["inputs"][2]["source"] = fresh["inputs"][1]["source"]
            for slot, conn in enumerate(fresh["inputs"]):
                allowed = self._op_choices(new_type, slot, t, conn["source"])
                if conn["op"] not in allowed:
                    conn["op"] = rng.choice(allowed)
            return fresh
        return {"type": ltype, "inputs": inputs}

    def validate(self, arch: Arch) -> None:
        """Check every layer, connection, operation and constraint; the error names the first violation."""
        super().validate(arch)
        layers = self.layer_list(arch, self.n_layers)
        for t, layer in enumerate(layers, start=1):
            where = f"layer {t}"
            if not isinstance(layer, dict) or set(layer) != {"type", "inputs"}:
                raise ArchError(f"{where}: must be an object with keys 'type' and 'inputs'")
            ltype = layer["type"]
            if ltype not in self.options.layer_types:
                raise ArchError(f"{where}: {unknown_name('layer type', ltype, self.options.layer_types)}")
            inputs = layer["inputs"]
            need = len(ROLES[ltype])
            if not isinstance(inputs, list) or len(inputs) != need:
                raise ArchError(f"{where}: an '{ltype}' layer takes {need} inputs, got "
                                f"{len(inputs) if isinstance(inputs, list) else inputs!r}")
            for slot, conn in enumerate(inputs):
                role = ROLES[ltype][slot] if ltype == "attn" else f"input {slot + 1}"
                w = f"{where} {role}"
                if not isinstance(conn, dict) or set(conn) != {"source", "op"}:
                    raise ArchError(f"{w}: must be an object with keys 'source' and 'op'")
                src, op = conn["source"], conn["op"]
                if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < t:
                    raise ArchError(f"{w}: source layer {src!r} out of range 0..{t - 1}")
                if op not in self.ops:
                    raise ArchError(f"{w}: {unknown_name('operation', op, self.ops)}")
                if self._is_skeleton(ltype, slot) and src != t - 1:
                    raise ArchError(f"{w}: constraint 1 requires the skeleton source to be layer {t - 1}, got {src}")
                if self.c3 and op == ZERO and (ltype == "attn" or self._is_skeleton(ltype, slot)):
                    raise ArchError(f"{w}: constraint 3 forbids the zero operation here")
                if op == IDENTITY and not self.identity_allowed(t, src):
                    what = "the raw input" if src == 0 and self.options.stem == "raw" else "the class scores"
                    raise ArchError(f"{w}: identity cannot connect layer {src} to layer {t} "
                                    f"(the widths differ at {what})")
            if ltype == "attn" and self.c2 and inputs[1]["source"] != inputs[2]["source"]:
                raise ArchError(f"{where}: constraint 2 requires Key and Value to share their source layer "
                                f"(got {inputs[1]['source']} and {inputs[2]['source']})")

    # ---------------------------------------------------------------- counting

    def layer_count(self, k: int) -> int:
        """Number of valid choices for layer ``k`` (1-based)."""
        def ops(ltype: str, slot: int, s: int) -> int:
            return len(self._op_choices(ltype, slot, k, s))

        total = 0
        if "add" in self.options.layer_types:
            first = sum(ops("add", 0, s) for s in self._source_choices(k, "add", 0))
            total += first * sum(ops("add", 1, s) for s in range(k))
        if "attn" in self.options.layer_types:
            q = sum(ops("attn", 0, s) for s in self._source_choices(k, "attn", 0))
            if self.c2:
                kv = sum(ops("attn", 1, s) * ops("attn", 2, s) for s in range(k))
            else:
                kv = sum(ops("attn", 1, s) for s in range(k)) * sum(ops("attn", 2, s) for s in range(k))
            total += q * kv
        return total

    def size(self) -> int:
        """Exact number of architectures: the product of :meth:`layer_count` over layers.

        Equals ``prod_k (b(b-1)k + (b-1)^3 k)`` with constraints 1-3 and
        ``prod_k (k^2 b^2 + k^3 b^3)`` without (Sec. 4.1.2-4.1.3), where ``identity`` is a
        choice on every connection.
        """
        out = 1
        for k in range(1, self.n_layers + 1):
            out *= self.layer_count(k)
        return out

    def enumerate(self) -> Iterator[Arch]:
        """Every architecture of the space (only sensible for tiny spaces; used by tests)."""
        per_layer = []
        for t in range(1, self.n_layers + 1):
            options = []
            for ltype in self.options.layer_types:
                n_in = len(ROLES[ltype])
                conn_options = [[{"source": s, "op": o} for s in range(t) for o in self.ops]] * n_in
                for combo in itertools.product(*conn_options):
                    layer = {"type": ltype, "inputs": [dict(c) for c in combo]}
                    options.append(layer)
            per_layer.append(options)
        for layers in itertools.product(*per_layer):
            arch = self.arch({"layers": list(layers)})
            try:
                self.validate(arch)
            except ArchError:
                continue
            yield arch

    # ---------------------------------------------------------------- description

    def baselines(self) -> dict[str, Baseline]:
        """Graphs: GCN and GAT with their papers' settings and training protocols
        (:data:`GCN_PROTOCOL`, :data:`GAT_PROTOCOL`; the ``gnn-baseline`` space, as the
        ``gcn-*``/``gat-*`` recipes), whatever the recipe's own ``retrain`` budget; the
        ``hetero`` pool: the eight GNNs of :mod:`attnas.spaces.hetero_baselines` (each one's
        options from ``space.options.baselines.<name>``); text: the Transformer encoder of the same depth, width,
        heads and dropout (Table 4's baseline, the ``text-transformer`` space)."""
        o = self.options
        if o.pool == "text":
            space = {"name": "text-transformer", "layers": o.layers, "hidden": o.hidden, "heads": o.heads,
                     "dropout": o.dropout}
            return {"transformer": Baseline({"model": "transformer"}, space,
                                            f"{o.layers}-layer Transformer encoder (hidden {o.hidden}, {o.heads} heads)")}
        if o.pool == "hetero":
            from attnas.spaces.hetero_baselines import DESCRIPTIONS

            tuned = (o.options or {}).get("baselines", {})  # per baseline: its options chosen on validation
            def described(m: str, text: str) -> str:  # the paper's settings, then what the recipe changed
                chosen = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in tuned.get(m, {}).items())
                return f"{text}; chosen on validation: {chosen}" if chosen else text

            rows = {m: Baseline({"model": m}, {"name": "hetero-baseline", **tuned.get(m, {})}, described(m, text))
                    for m, text in DESCRIPTIONS.items()}
            return {**rows, **self.residual_baselines()} if o.block == "residual" else rows
        return {"gcn": Baseline({"model": "gcn"}, {"name": "gnn-baseline"},
                                "GCN (Kipf & Welling 2017: 2 layers, hidden 16, dropout 0.5)", GCN_PROTOCOL),
                "gat": Baseline({"model": "gat"}, {"name": "gnn-baseline"},
                                "GAT (Velickovic et al. 2018: 8 heads x 8 units, dropout 0.6)", GAT_PROTOCOL)}

    #: ``space.block: residual``: Platonov et al.'s (ICLR 2023) models as points of this space,
    #: by row name: (operation of every layer, description).
    RESIDUAL_BASELINES = {
        "res_mlp": ("linear", "ResNet"),
        "res_gcn": ("gcn", "GCN"),
        "res_sage": ("sage", "GraphSAGE"),
        "res_gat": ("gat_8", "GAT, 8 heads"),
        "res_gat_sep": ("gat_sep_8", "GAT-sep, 8 heads"),
    }

    def residual_baselines(self) -> dict[str, Baseline]:
        """With ``block: residual``: Platonov et al.'s (ICLR 2023) hand-designed GNNs with skip
        connections and layer norm, as points of this space trained under the recipe's options
        (depth, width, dropout): every layer ``add(t-1:<op>, 0:zero)``. Only the operations in
        the space's pool are offered."""
        o = self.options
        if "add" not in o.layer_types:
            return {}
        rows = {}
        for name, (op, what) in self.RESIDUAL_BASELINES.items():
            if op not in self.ops or ZERO not in self.ops:
                continue
            layers = [{"type": "add", "inputs": [{"source": t - 1, "op": op}, {"source": 0, "op": ZERO}]}
                      for t in range(1, o.layers + 1)]
            rows[name] = Baseline({"layers": layers}, None,
                                  f"{what} with residual blocks and layer norm (Platonov et al. 2023; "
                                  f"{o.layers} layers, hidden {o.hidden}, dropout {o.dropout})")
        return rows

    def describe(self, arch: Arch) -> str:
        """E.g. ``L1=add(0:gcn, 0:zero) L2=attn(q=1:gat_4, k=0:sage, v=0:linear)``."""
        parts = []
        for t, layer in enumerate(arch.choices["layers"], start=1):
            if layer["type"] == "add":
                conns = ", ".join(f"{c['source']}:{c['op']}" for c in layer["inputs"])
            else:
                conns = ", ".join(f"{r}={c['source']}:{c['op']}" for r, c in zip("qkv", layer["inputs"]))
            parts.append(f"L{t}={layer['type']}({conns})")
        return " ".join(parts)

    def to_dag(self, arch: Arch) -> tuple[np.ndarray, list[str]]:
        """The architecture as a DAG in topological order.

        Nodes: ``input``; for each layer, one node per connection labelled
        ``<op>@<role>`` (role ``in`` for addition inputs, ``q``/``k``/``v`` for attention)
        followed by the layer's node (``add`` or ``attn``); finally ``output``.
        Edges: source layer -> connection node -> its layer node; last layer -> output.
        """
        labels = ["input"]
        layer_node = [0]
        edges = []
        for layer in arch.choices["layers"]:
            conn_nodes = []
            for slot, conn in enumerate(layer["inputs"]):
                role = "in" if layer["type"] == "add" else "qkv"[slot]
                labels.append(f"{conn['op']}@{role}")
                node = len(labels) - 1
                edges.append((layer_node[conn["source"]], node))
                conn_nodes.append(node)
            labels.append(layer["type"])
            me = len(labels) - 1
            edges.extend((c, me) for c in conn_nodes)
            layer_node.append(me)
        labels.append("output")
        edges.append((layer_node[-1], len(labels) - 1))
        adj = np.zeros((len(labels), len(labels)), dtype=np.int64)
        for a, b in edges:
            adj[a, b] = 1
        return adj, labels

    def from_dag(self, adj: np.ndarray, labels: list[str]) -> Arch:
        """The architecture a DAG from :meth:`to_dag` describes (e.g. one decoded by a graph VAE).

        Raises:
            ArchError: When the DAG is not the drawing of a valid architecture of this space.
        """
        adj = np.asarray(adj)
        n = len(labels)
        if adj.shape != (n, n):
            raise ArchError(f"DAG: adjacency of shape {adj.shape} for {n} labels")
        if n < 2 or labels[0] != "input" or labels[-1] != "output":
            raise ArchError("DAG: must start with an 'input' node and end with an 'output' node")
        preds = [list(np.nonzero(adj[:, j])[0]) for j in range(n)]
        layer_index = {0: 0}  # node -> layer number
        layers = []
        for node in range(1, n - 1):
            lab = labels[node]
            if lab in LAYER_TYPES:
                conns = []
                for c in preds[node]:
                    op, _, role = labels[c].partition("@")
                    if not role or len(preds[c]) != 1 or preds[c][0] not in layer_index:
                        raise ArchError(f"DAG: node {c} ('{labels[c]}') is not a connection from an earlier layer")
                    conns.append((c, op, role, layer_index[preds[c][0]]))
                if lab == "attn":
                    order = {r: i for i, r in enumerate("qkv")}
                    if sorted(r for _, _, r, _ in conns) != ["k", "q", "v"]:
                        raise ArchError(f"DAG: attention node {node} needs one q, one k and one v connection")
                    conns.sort(key=lambda c: order[c[2]])
                else:
                    if [r for _, _, r, _ in conns] != ["in", "in"]:
                        raise ArchError(f"DAG: addition node {node} needs two 'in' connections")
                    conns.sort(key=lambda c: c[0])
                layers.append({"type": lab, "inputs": [{"source": src, "op": op} for _, op, _, src in conns]})
                layer_index[node] = len(layers)
            elif "@" not in lab:
                raise ArchError(f"DAG: unknown node label '{lab}'")
        arch = self.arch({"layers": layers})
        self.validate(arch)
        return arch

    def dag_vocabulary(self) -> list[str]:
        """Every node label :meth:`to_dag` can produce (for graph encoders)."""
        roles = ["in"] if "add" in self.options.layer_types else []
        if "attn" in self.options.layer_types:
            roles += ["q", "k", "v"]
        return ["input", "output", *self.options.layer_types, *(f"{o}@{r}" for r in roles for o in self.ops)]

    # ---------------------------------------------------------------- networks

    def check_task(self, task: Any) -> None:
        """Refuse task kinds without a registered domain adapter, and options the adapter refuses
        (e.g. a text task with a graph operation pool)."""
        adapter_for(self, task.info)

    def supernet(self, task: Any) -> nn.Module:
        """The one-shot supernet with context-aware parameter sharing (Sec. 4.2)."""
        return AutoAttendSupernet(network_config(self, task.info))

    def build(self, arch: Arch, task: Any) -> nn.Module:
        """A standalone model of ``arch`` for ``task``."""
        self.validate(arch)
        return AutoAttendModel(network_config(self, task.info), arch)
