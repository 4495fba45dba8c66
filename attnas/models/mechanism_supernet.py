"""The attention-mechanism supernet of DARTFormer (Brown et al. 2022, Sec. 3.1-3.3).

One encoder layer whose attention is a *supernet layer* holding a candidate block per
mechanism (homogeneous search) or ``H`` single-head blocks per mechanism (heterogeneous
search). The candidates' outputs are averaged with a fixed alpha: no architecture
weights and no bi-level optimisation, so the supernet is trained like any network and
the strength of each candidate is read afterwards with masked validation accuracy
(Wang et al. 2021, "Rethinking Architecture Selection in Differentiable NAS"): the
validation accuracy with every candidate minus the accuracy with one candidate's output
zeroed (see :mod:`attnas.strategies._mechanism_selection`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, Literal

import torch
from torch import nn

from attnas.core.errors import ConfigError
from attnas.models.transformer_encoder import EncoderLayer, MechanismSpec, SequenceClassifier, TokenEmbedding
from attnas.ops.attention_mechanisms import build_mechanism, mechanism_names

#: The candidate mechanisms of the search, in the order blocks are created.
DEFAULT_CANDIDATES = (
    "softmax", "linear", "performer", "linformer", "reformer", "local", "longformer", "bigbird", "sparse",
    "synthesizer-dense", "synthesizer-random",
)


class SupernetAttention(nn.Module):
    r"""Candidate attention blocks averaged with a fixed alpha (DARTFormer, Sec. 3.1).

    .. math::
        \bar o(x) = \frac{1}{|\mathcal A|} \sum_{j \in \mathcal A} m_j\, o_j(x),

    where :math:`\mathcal A` are the active (not yet pruned) blocks and
    :math:`m_j \in \{0, 1\}` masks a block's output for masked-validation scoring (the
    masked block is not run; alpha stays :math:`1/|\mathcal A|`). Pruning a block
    (:meth:`drop`) removes it from :math:`\mathcal A`; the active set is a buffer, so it
    is saved in ``state_dict`` and a pruned supernet reloads as pruned.

    Args:
        dim: Model dimension ``D``.
        mechanisms: Candidate mechanism names.
        heads: Heads of each homogeneous block, or single-head blocks per mechanism in
            the heterogeneous search.
        mode: ``homogeneous`` (one ``heads``-head block per mechanism, named like the
            mechanism) or ``heterogeneous`` (``heads`` single-head blocks per mechanism
            with ``head_dim = D / heads``, named ``mechanism/i``).
        max_len: Longest sequence.
        options: ``{mechanism: {option: value}}``.

    Shapes:
        - **input:** ``x`` ``[B, L, D]``, ``mask`` ``[B, L]`` bool.
        - **output:** ``[B, L, D]``.
    """

    def __init__(self, dim: int, mechanisms: Sequence[str] = DEFAULT_CANDIDATES, heads: int = 4,
                 mode: Literal["homogeneous", "heterogeneous"] = "homogeneous", max_len: int = 512,
                 options: Mapping[str, Mapping[str, Any]] | None = None):
        super().__init__()
        if mode not in ("homogeneous", "heterogeneous"):
            raise ConfigError(f"mode: must be 'homogeneous' or 'heterogeneous', got {mode!r}")
        mechanisms = list(mechanisms)
        if not mechanisms:
            raise ConfigError("mechanisms: the supernet needs at least one candidate")
        if len(set(mechanisms)) != len(mechanisms):
            raise ConfigError(f"mechanisms: each candidate may appear once, got {mechanisms}")
        known = mechanism_names()
        for name in mechanisms:
            if name not in known:
                from attnas.core.errors import unknown_name

                raise ConfigError("mechanisms: " + unknown_name("attention mechanism", name, known))
        options = options or {}
        for name in options:
            if name not in mechanisms:
                raise ConfigError(
                    f"mechanism_options: '{name}' is not a candidate; candidates: {', '.join(mechanisms)}"
                )
        self.mode, self.heads = mode, heads
        self.names: list[str] = []
        self.mechanisms: list[str] = []
        blocks = []
        for mech in mechanisms:
            opts = dict(options.get(mech, {}))
            if mode == "homogeneous":
                blocks.append(build_mechanism(mech, dim, heads=heads, max_len=max_len, **opts))
                self.names.append(mech)
                self.mechanisms.append(mech)
            else:
                if dim % heads:
                    raise ConfigError(f"heterogeneous search: dim {dim} is not divisible by heads {heads}")
                for i in range(heads):
                    blocks.append(build_mechanism(mech, dim, heads=1, head_dim=dim // heads, max_len=max_len, **opts))
                    self.names.append(f"{mech}/{i}")
                    self.mechanisms.append(mech)
        self.blocks = nn.ModuleList(blocks)
        self.register_buffer("active", torch.ones(len(blocks), dtype=torch.bool))
        self._masked: frozenset[int] = frozenset()
        self._cache: dict | None = None

    # -- which blocks run ------------------------------------------------------------------------

    def index(self, name: str) -> int:
        """Position of the block called ``name``."""
        try:
            return self.names.index(name)
        except ValueError:
            from attnas.core.errors import unknown_name

            raise ConfigError(unknown_name("supernet block", name, self.names)) from None

    @property
    def active_names(self) -> list[str]:
        """Names of the blocks not pruned, in creation order."""
        return [n for n, a in zip(self.names, self.active.tolist()) if a]

    @contextmanager
    def masked(self, names: Iterable[str]) -> Iterator[None]:
        """Zero the outputs of the blocks ``names`` inside the ``with`` (alpha unchanged)."""
        idx = frozenset(self.index(n) for n in names)
        previous = self._masked
        self._masked = previous | idx
        try:
            yield
        finally:
            self._masked = previous

    @contextmanager
    def reuse_outputs(self) -> Iterator[None]:
        """Inside the ``with``, in eval mode, reuse block outputs across calls on the same input.

        Masked-validation scoring runs the supernet once per masking pattern on the same
        batch; a block's output does not depend on which other blocks are masked, so each
        block runs once per batch and later calls with an equal input (and mask) reuse
        it. The result is the same as running every block again (frozen random
        structure and eval mode make the blocks deterministic); in training mode the
        cache is ignored.
        """
        previous = self._cache
        self._cache = {}
        try:
            yield
        finally:
            self._cache = previous

    def _cached_outputs(self, x: torch.Tensor, mask: torch.Tensor | None) -> dict[int, torch.Tensor] | None:
        cache = self._cache
        if cache is None or self.training:
            return None
        same = (cache.get("x") is not None and cache["x"].shape == x.shape and torch.equal(cache["x"], x)
                and ((mask is None and cache["mask"] is None)
                     or (mask is not None and cache["mask"] is not None and cache["mask"].shape == mask.shape
                         and torch.equal(cache["mask"], mask))))
        if not same:
            cache.clear()
            cache.update(x=x, mask=mask, out={})
        return cache["out"]

    def drop(self, name: str) -> None:
        """Prune the block ``name`` (it no longer runs; alpha becomes ``1 / |active|``)."""
        j = self.index(name)
        if not bool(self.active[j]):
            raise ConfigError(f"supernet block '{name}' is already dropped")
        if int(self.active.sum()) == 1:
            raise ConfigError(f"cannot drop '{name}': it is the last active block")
        self.active[j] = False

    def kept(self) -> MechanismSpec:
        """The searched attention: a mechanism name if one homogeneous block is active,
        else ``{mechanism: active heads}``."""
        active = self.active.tolist()
        if self.mode == "homogeneous":
            names = [n for n, a in zip(self.names, active) if a]
            return names[0] if len(names) == 1 else {n: self.heads for n in names}
        counts: dict[str, int] = {}
        for mech, a in zip(self.mechanisms, active):
            if a:
                counts[mech] = counts.get(mech, 0) + 1
        return counts

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        active = [j for j, a in enumerate(self.active.tolist()) if a]
        cached = self._cached_outputs(x, mask)
        out = torch.zeros_like(x)
        for j in active:
            if j in self._masked:
                continue
            if cached is None:
                y = self.blocks[j](x, mask)
            else:
                y = cached.get(j)
                if y is None:
                    y = cached[j] = self.blocks[j](x, mask)
            out = out + y
        return out / len(active)


class MechanismSupernet(SequenceClassifier):
    """DARTFormer's search network: embedding, supernet attention layer(s), FFN, linear classifier (Sec. 3.2).

    DARTFormer's supernet has one encoder layer (``depth=1``). A task that no one-layer
    model can solve (associative recall needs a layer that moves each key next to its
    value before another matches the query) makes every drop score zero; ``depth > 1``
    stacks supernet layers with the candidate set of each layer shared: masking or
    pruning a block masks or prunes it in every layer, as the searched cell is stacked
    in every layer of the final model.

    Args:
        vocab_size: Number of token ids.
        num_classes: Output size.
        mechanisms: Candidate mechanisms.
        mode: ``homogeneous`` or ``heterogeneous`` (see :class:`SupernetAttention`).
        dim: Model dimension ``D``.
        heads: Heads per block (homogeneous) or single-head blocks per mechanism
            (heterogeneous): the number of heads the final model has.
        ffn_dim: FFN hidden size (default ``4 * dim``).
        max_len: Longest token sequence.
        dropout: Dropout rate.
        norm: ``pre`` or ``post``.
        pool: ``mean``, ``cls`` or ``token`` (per-token logits).
        positions: ``sinusoidal`` or ``learned``.
        pad_id: Padding id.
        mechanism_options: ``{mechanism: {option: value}}``.
        depth: Supernet encoder layers (DARTFormer: 1).
        path_keep: In training mode, run only this many active blocks per forward pass,
            drawn uniformly (the same blocks in every layer), the others masked as in
            scoring with alpha unchanged: path dropout (Bender et al. 2018, "Understanding
            and Simplifying One-Shot Architecture Search", Sec. 3) with a fixed number of
            paths, single-path sampling (Guo et al. 2020, SPOS) at ``1``. ``0`` (DARTFormer):
            every block runs. Evaluation always runs every unmasked block.

    Shapes:
        - **input:** batch ``{"tokens": [B, L], "mask": [B, L]}``.
        - **output:** logits ``[B, num_classes]`` (``[B, L, num_classes]`` with ``pool: token``).
    """

    def __init__(self, vocab_size: int, num_classes: int, mechanisms: Sequence[str] = DEFAULT_CANDIDATES,
                 mode: Literal["homogeneous", "heterogeneous"] = "homogeneous", dim: int = 64, heads: int = 4,
                 ffn_dim: int | None = None, max_len: int = 512, dropout: float = 0.1,
                 norm: Literal["pre", "post"] = "pre", pool: Literal["mean", "cls"] = "mean",
                 positions: Literal["sinusoidal", "learned"] = "sinusoidal", pad_id: int = 0,
                 mechanism_options: Mapping[str, Mapping[str, Any]] | None = None, depth: int = 1,
                 path_keep: int = 0):
        if depth < 1:
            raise ConfigError(f"supernet depth: must be >= 1, got {depth}")
        if path_keep < 0:
            raise ConfigError(f"path_keep: must be >= 0 (0: every block), got {path_keep}")
        embed = TokenEmbedding(vocab_size, dim, max_len, positions, pad_id, cls=pool == "cls")
        supernets = [SupernetAttention(dim, mechanisms, heads, mode, max_len + int(pool == "cls"), mechanism_options)
                     for _ in range(depth)]
        layers = [EncoderLayer(sn, dim, ffn_dim or 4 * dim, dropout, norm) for sn in supernets]
        super().__init__(embed, layers, dim, num_classes, norm, pool)
        self.supernet = supernets[0]
        self._supernets = supernets  # every layer's (plain list: the modules are registered in self.layers)
        self.path_keep = path_keep

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits of a batch; in training mode with ``path_keep = k``, through ``k`` random active blocks."""
        active = self.active_names
        k = self.path_keep
        if not self.training or not 0 < k < len(active):
            return super().forward(batch)
        kept = set(torch.randperm(len(active))[:k].tolist())  # the global RNG: checkpointed with training
        with self.masked([n for i, n in enumerate(active) if i not in kept]):
            return super().forward(batch)

    # the selection interface (see attnas.strategies._mechanism_selection)
    @property
    def block_names(self) -> list[str]:
        """Every candidate block's name."""
        return list(self.supernet.names)

    @property
    def active_names(self) -> list[str]:
        """Names of the blocks not pruned."""
        return self.supernet.active_names

    @contextmanager
    def masked(self, names: Iterable[str]) -> Iterator[None]:
        """Context manager zeroing the outputs of ``names`` (in every layer)."""
        names = list(names)
        with ExitStack() as stack:
            for sn in self._supernets:
                stack.enter_context(sn.masked(names))
            yield

    @contextmanager
    def reuse_outputs(self) -> Iterator[None]:
        """Context manager reusing block outputs across masked evaluations of one batch."""
        with ExitStack() as stack:
            for sn in self._supernets:
                stack.enter_context(sn.reuse_outputs())
            yield

    def drop(self, name: str) -> None:
        """Prune the block ``name`` (in every layer)."""
        for sn in self._supernets:
            sn.drop(name)

    def kept(self) -> MechanismSpec:
        """The searched attention (a name, or ``{mechanism: heads}``)."""
        return self.supernet.kept()
