"""Options of the AutoAttend search space (``space:`` of a recipe; Guan et al., ICML 2021, Sec. 4.1).

The space itself is :class:`attnas.spaces.autoattend.AutoAttendSpace`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from attnas.config import CheckedConfig, Fraction, PositiveInt
from attnas.core.errors import ConfigError, unknown_name


@dataclass(frozen=True)
class AutoAttendConfig(CheckedConfig):
    """Options of the AutoAttend space.

    Attributes:
        layers: Number of searchable layers n.
        hidden: Hidden size of every layer.
        pool: Operation pool: ``pyg`` (Cora/PPI), ``mp`` (CiteSeer/PubMed, Eq. 7), ``text``.
        ops: Subset of the pool to search (empty: the whole pool).
        layer_types: Layer types to search; ``["add"]`` is the baseline space of Sec. 4.1.1.
        constraints: Which of constraints 1, 2, 3 (Sec. 4.1.3) apply.
        context: Parameter sharing of the supernet (Sec. 4.2.2, 5.4.2): ``nc`` no context,
            ``sc`` source, ``tc`` target, ``fc`` full context.
        heads: Heads h of the attention layer (Eq. 8; 4 for graphs, 8 for text).
        op_heads: Heads h_m of the Eq. 7 message-passing operations.
        act: Activation after parametric operations (``tanh`` is Eq. 7's sigma).
        dropout: Dropout on the input features and on every connection's input.
        attn_dropout: Dropout on attention coefficients (attention layer, GAT, Eq. 7).
        stem: ``project``: layer 0 is a linear projection of the input to ``hidden``, shared
            by all architectures; ``raw``: layer 0 is the input itself and the operations
            reading it map its width to ``hidden`` (graphs).
        head: ``linear``: a linear classifier after the last layer, shared by all
            architectures; ``none``: the last layer's operations output the class scores
            (graphs).
        out_act: Activation of the last layer's operations when ``head`` is ``none``
            (``linear``: none, as GCN's and GAT's output layers).
        qk_norm: Graphs: scale each head's query and key to unit root-mean-square before
            Eq. 8 (not in the paper; without it the hidden attention layers of the Cora
            recipe get near-zero energies and average uniformly, docs/results/autoattend_graph.md).
        block: ``plain``: a layer's output is its aggregation (the paper's layers);
            ``residual``: pre-norm residual blocks as Platonov et al. (ICLR 2023, Sec. 4) train
            every GNN with, ``h_t = h_{t-1} + Dropout(W_t a_t + b_t)`` where each operation of
            layer ``t`` reads ``LayerNorm(h_s)`` and ``a_t`` is the layer's sum or attention
            (:mod:`attnas.models.residual_blocks`); needs ``stem: project`` and ``head: linear``
            (one width throughout).
        options: Domain-specific extras (e.g. text: ``{max_len: 64}``).
    """

    layers: PositiveInt = 2
    hidden: PositiveInt = 64
    pool: str = "pyg"
    ops: tuple[str, ...] = ()
    layer_types: tuple[Literal["add", "attn"], ...] = ("add", "attn")
    constraints: tuple[int, ...] = (1, 2, 3)
    context: Literal["nc", "sc", "tc", "fc"] = "fc"
    heads: PositiveInt = 4
    op_heads: PositiveInt = 4
    act: str = "elu"
    dropout: Fraction = 0.6
    attn_dropout: Fraction = 0.6
    stem: Literal["project", "raw"] = "project"
    head: Literal["linear", "none"] = "linear"
    out_act: str = "linear"
    qk_norm: bool = False
    block: Literal["plain", "residual"] = "plain"
    options: dict[str, Any] | None = None

    field_prefix = "space."

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.layer_types:
            raise ConfigError("space.layer_types: must name at least one of add, attn")
        if len(set(self.layer_types)) != len(self.layer_types):
            raise ConfigError(f"space.layer_types: repeated entries in {list(self.layer_types)}")
        bad = [c for c in self.constraints if c not in (1, 2, 3)]
        if bad:
            raise ConfigError(f"space.constraints: {bad} are not constraints; valid: 1, 2, 3")
        if "attn" in self.layer_types and self.hidden % self.heads:
            raise ConfigError(f"space.hidden: {self.hidden} is not divisible by space.heads={self.heads}")
        if self.block == "residual" and (self.stem, self.head) != ("project", "linear"):
            raise ConfigError(f"space.block: 'residual' needs stem 'project' and head 'linear' (one width for the "
                              f"residual stream), got stem '{self.stem}', head '{self.head}'")
        from attnas.ops.autoattend.common import ACTIVATIONS

        for key in ("act", "out_act"):
            if getattr(self, key) not in ACTIVATIONS:
                raise ConfigError(f"space.{key}: {unknown_name('activation', getattr(self, key), ACTIVATIONS)}")
