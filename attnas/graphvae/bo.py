"""Batch expected-improvement Bayesian optimisation in a graph VAE's latent space.

Chatzianastasis et al., 2021, Sec. 4.3, following D-VAE (Zhang et al. 2019, Sec. 4.3 and its
``bayesian_optimization/bo.py``): start from the training architectures' latent means
and scores; in each of 10 iterations fit the sparse GP, pick a batch of latent points by
expected improvement within the box spanned by the data, decode every point many times
and keep its most common valid decoding, score the decoded architectures, and add
``(point, score)`` to the data (an invalid decoding gets the worst observed score).

Scores come from an :class:`~attnas.graphvae.evaluator.Evaluator`. On a table of measured
architectures (ENAS's 19,020) a decoded architecture outside the table has no score: its
proposal is labelled ``unscored`` (value None), counted, and never reported as an accuracy.
What enters the GP data for it is ``BOConfig.unscored``: ``"worst"`` (the worst observed
score, D-VAE's rule for invalid decodings, so the search moves away from the region) or
``"skip"`` (the point is left out).

D-VAE selects its batch of 50 greedily with a Theano batch-EI (each new point maximises
EI given the previous ones at their predicted means). Here BoTorch's Monte-Carlo
``qExpectedImprovement`` is optimised with ``optimize_acqf(sequential=True)`` (greedy
sequential selection, each point conditioned on the pending ones), the library
counterpart of that procedure. D-VAE decodes each point 500 times; its code means to take
the most common valid decoding (a quirk of ``np.argmax`` on ``dict.values()`` makes it
take the first valid one); here the most common one is taken.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

import torch
from torch import Tensor

from attnas.config import CheckedConfig, PositiveInt, Seed
from attnas.core.errors import DataError
from attnas.graphvae.dag_batch import DagBatch
from attnas.graphvae.evaluator import UNSCORED, Evaluator
from attnas.graphvae.gp import SparseGPConfig, fit_sparse_gp
from attnas.graphvae.vae import GraphVAE
from attnas.reporting.progress import progress

INVALID = "invalid"


@dataclass(frozen=True)
class BOConfig(CheckedConfig):
    """Latent Bayesian-optimisation settings (defaults: D-VAE's ENAS protocol).

    Attributes:
        iterations: BO rounds (paper: 10).
        batch_size: Points selected per round (D-VAE: 50).
        decode_attempts: Decodings per selected point (D-VAE: 500).
        acquisition: ``"qEI"`` (expected improvement, as the paper) or ``"qLogEI"``
            (BoTorch's numerically safer log form).
        num_restarts: Starting points of each acquisition optimisation.
        raw_samples: Random points scored to choose the starting points (D-VAE's grid: 10,000).
        mc_samples: Monte-Carlo samples of the acquisition.
        maxiter: L-BFGS iterations per acquisition optimisation.
        sequential: Pick the batch greedily, one point at a time given the pending ones (as
            D-VAE's greedy batch EI); False optimises the whole batch jointly.
        gp: Sparse-GP settings.
        seed: Seed of the GP fits, the acquisition and the decoding.
        unscored: What enters the GP data for a proposal the evaluator cannot score
            (``source="unscored"``, e.g. an architecture outside the table): ``"worst"``
            (the worst observed score, as an invalid decoding) or ``"skip"`` (nothing).
    """

    iterations: PositiveInt = 10
    batch_size: PositiveInt = 50
    decode_attempts: PositiveInt = 500
    acquisition: Literal["qEI", "qLogEI"] = "qEI"
    num_restarts: PositiveInt = 10
    raw_samples: PositiveInt = 1000
    mc_samples: PositiveInt = 256
    maxiter: PositiveInt = 200
    sequential: bool = True
    gp: SparseGPConfig = field(default_factory=SparseGPConfig)
    seed: Seed = 0
    unscored: Literal["worst", "skip"] = "worst"


#: The former name of :class:`BOConfig`, still importable.
BOSettings = BOConfig


@dataclass
class Proposal:
    """One decoded, scored point of a BO round.

    Attributes:
        iteration: 0-based BO round.
        z: The latent point.
        key: :meth:`DagBatch.keys` key of its decoded architecture (None if no valid decoding).
        graph: ``(adjacency, types)`` of the architecture (None if invalid).
        value: Its score (the worst observed score when invalid, None when unscored).
        source: Where the score came from (``"dataset"``, another evaluator's name,
            ``"invalid"`` or ``"unscored"``).
    """

    iteration: int
    z: list[float]
    key: str | None
    graph: tuple[list[list[int]], list[int]] | None
    value: float | None
    source: str

    @property
    def scored(self) -> bool:
        """Whether the proposal is a valid architecture with a score."""
        return self.source not in (INVALID, UNSCORED)

    def to_dict(self, with_z: bool = False) -> dict:
        """Plain data (the latent point too with ``with_z``)."""
        out = {
            "iteration": self.iteration,
            "key": self.key,
            "adjacency": None if self.graph is None else self.graph[0],
            "types": None if self.graph is None else self.graph[1],
            "value": self.value,
            "source": self.source,
        }
        if with_z:
            out["z"] = list(self.z)
        return out

    @staticmethod
    def from_dict(data: dict) -> Proposal:
        """Inverse of :meth:`to_dict` with ``with_z=True``."""
        graph = None if data["adjacency"] is None else (data["adjacency"], data["types"])
        value = None if data["value"] is None else float(data["value"])
        return Proposal(int(data["iteration"]), list(data["z"]), data["key"], graph, value, data["source"])


@dataclass
class BOResult:
    """All proposals of a BO run and the best one found.

    Attributes:
        proposals: Every proposal, in order.
        best: The scored proposal with the highest score (None if there is none).
    """

    proposals: list[Proposal]
    best: Proposal | None

    def counts(self) -> dict[str, int]:
        """Number of proposals by outcome: ``scored``, ``unscored``, ``invalid``."""
        return {"scored": sum(p.scored for p in self.proposals),
                "unscored": sum(p.source == UNSCORED for p in self.proposals),
                "invalid": sum(p.source == INVALID for p in self.proposals)}

    def to_dict(self) -> dict:
        return {
            "proposals": [p.to_dict() for p in self.proposals],
            "best": None if self.best is None else self.best.to_dict(),
            "counts": self.counts(),
        }


@torch.no_grad()
def decode_most_common(
    model: GraphVAE,
    z: Tensor,
    attempts: int,
    is_valid: Callable[[DagBatch], Tensor],
    generator: torch.Generator | None = None,
    chunk: int = 20000,
    prefer: Callable[[DagBatch], Tensor] | None = None,
) -> list[DagBatch | None]:
    """Decode every point ``attempts`` times and keep its most common valid decoding.

    Args:
        model: The VAE.
        z: Latent points ``(P, latent)``.
        attempts: Stochastic decodings per point.
        is_valid: Validity test.
        generator: Random generator of the decoding.
        chunk: Decodings run at once.
        prefer: Optional test (e.g. "the table holds it"): a point keeps its most common
            valid decoding that passes it, and only when none does, its most common valid one.

    Returns:
        One single-graph :class:`DagBatch` per point, or None when no decoding was valid.
    """
    was = model.training
    model.eval()
    counts: list[Counter] = [Counter() for _ in range(len(z))]
    preferred: list[Counter] = [Counter() for _ in range(len(z))]
    examples: list[dict[str, DagBatch]] = [{} for _ in range(len(z))]
    reps = z.repeat(attempts, 1)
    owner = torch.arange(len(z)).repeat(attempts)
    try:
        for start in range(0, len(reps), chunk):
            decoded = model.decode(reps[start : start + chunk], generator=generator)
            valid = is_valid(decoded)
            good = valid & prefer(decoded) if prefer is not None else torch.zeros_like(valid)
            keys = decoded.keys()
            for j in valid.nonzero().squeeze(1).tolist():
                i = int(owner[start + j])
                counts[i][keys[j]] += 1
                if good[j]:
                    preferred[i][keys[j]] += 1
                if keys[j] not in examples[i]:
                    examples[i][keys[j]] = decoded.index([j])
    finally:
        model.train(was)
    out: list[DagBatch | None] = []
    for i, c in enumerate(counts):
        pick = preferred[i] if preferred[i] else c
        out.append(examples[i][pick.most_common(1)[0][0]] if pick else None)
    return out


def _select(gp_model, x: Tensor, y_std: Tensor, settings: BOConfig, generator_seed: int) -> Tensor:
    from botorch.acquisition import qExpectedImprovement, qLogExpectedImprovement
    from botorch.optim import optimize_acqf
    from botorch.sampling import SobolQMCNormalSampler

    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([settings.mc_samples]), seed=generator_seed)
    cls = qExpectedImprovement if settings.acquisition == "qEI" else qLogExpectedImprovement
    bounds = torch.stack([x.min(0).values, x.max(0).values])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch's advice to prefer qLogEI and optimiser chatter
        acq = cls(gp_model, best_f=float(y_std.max()), sampler=sampler)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(generator_seed)
            cand, _ = optimize_acqf(
                acq,
                bounds=bounds,
                q=settings.batch_size,
                num_restarts=settings.num_restarts,
                raw_samples=settings.raw_samples,
                sequential=settings.sequential,
                options={"maxiter": settings.maxiter},
            )
    return cand.detach()


def propose(
    model: GraphVAE,
    x: Tensor,
    y: Tensor,
    is_valid: Callable[[DagBatch], Tensor],
    settings: BOConfig,
    iteration: int,
    generator: torch.Generator | None = None,
    prefer: Callable[[DagBatch], Tensor] | None = None,
) -> tuple[Tensor, list[DagBatch | None]]:
    """One BO round's proposals: fit the sparse GP, pick a batch by EI, decode it.

    Args:
        model: The trained VAE.
        x: Latent points with known scores, ``(n, latent)``.
        y: Their scores, ``(n,)`` (higher is better).
        is_valid: Validity test for decodings.
        settings: BO settings (the GP and acquisition seeds are offset by ``iteration``).
        iteration: 0-based round.
        generator: Random generator of the decoding.
        prefer: Decodings to prefer (see :func:`decode_most_common`).

    Returns:
        The selected points ``(batch_size, latent)`` and, per point, its most common valid
        decoding (None when no decoding was valid).
    """
    x = torch.as_tensor(x, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
    if len(x) != len(y) or len(x) < 2:
        raise DataError(f"latent BO needs at least 2 scored points with matching latents, got {len(x)} and {len(y)}")
    gp = fit_sparse_gp(x, y, replace(settings.gp, seed=settings.gp.seed + iteration),
                       description=f"BO {iteration + 1} sparse GP")
    cand = _select(gp.model, x, gp.standardize(y), settings, settings.seed * 1000 + iteration)
    decoded = decode_most_common(model, cand.to(torch.float32), settings.decode_attempts, is_valid, generator,
                                 prefer=prefer)
    return cand, decoded


@dataclass
class BOState:
    """Where a latent-BO run stands (checkpointable with :meth:`state_dict`).

    Attributes:
        x: Every latent point with a score so far (initial data, then proposals).
        y: Their scores.
        proposals: Every proposal so far.
        iteration: Rounds completed.
        generator: Random generator of the decoding.
    """

    x: Tensor
    y: Tensor
    proposals: list[Proposal]
    iteration: int
    generator: torch.Generator

    @staticmethod
    def start(z_train: Tensor, y_train: Tensor, seed: int) -> BOState:
        """The state before the first round: the scored data and a seeded generator."""
        x = torch.as_tensor(z_train, dtype=torch.float64).clone()
        y = torch.as_tensor(y_train, dtype=torch.float64).reshape(-1).clone()
        if len(x) != len(y) or len(x) < 2:
            raise DataError(f"latent BO needs at least 2 scored points with matching latents, got {len(x)} and {len(y)}")
        return BOState(x, y, [], 0, torch.Generator().manual_seed(seed))

    def state_dict(self) -> dict:
        """Tensors and plain data only."""
        return {"x": self.x, "y": self.y, "proposals": [p.to_dict(with_z=True) for p in self.proposals],
                "iteration": self.iteration, "generator": self.generator.get_state()}

    @staticmethod
    def from_state_dict(data: dict) -> BOState:
        """Rebuild a state saved with :meth:`state_dict`."""
        gen = torch.Generator()
        gen.set_state(data["generator"])
        return BOState(data["x"], data["y"], [Proposal.from_dict(p) for p in data["proposals"]],
                       int(data["iteration"]), gen)

    def result(self) -> BOResult:
        """The proposals so far and the best scored one."""
        scored = [p for p in self.proposals if p.scored]
        return BOResult(list(self.proposals), max(scored, key=lambda p: p.value) if scored else None)


def latent_bo(
    model: GraphVAE,
    z_train: Tensor,
    y_train: Tensor,
    evaluator: Evaluator,
    is_valid: Callable[[DagBatch], Tensor],
    settings: BOConfig = BOConfig(),
    on_iteration: Callable[[int, list[Proposal]], None] | None = None,
    state: BOState | None = None,
    prefer: Callable[[DagBatch], Tensor] | None = None,
) -> BOResult:
    """Maximise a score over architectures by batch EI in the VAE's latent space.

    Args:
        model: The trained VAE (its decoder turns points into architectures).
        z_train: Latent means of the architectures with known scores.
        y_train: Their scores (higher is better).
        evaluator: Scores decoded architectures (every answer carries its source).
        is_valid: Validity test for decodings (ENAS: ``is_valid_enas(b, n_nodes=8)``).
        settings: BO settings.
        on_iteration: Called after each round with its index and proposals; the state
            (``state`` when given) is up to date then, so this is where to checkpoint it.
        state: A state to continue (from :meth:`BOState.from_state_dict`); by default a
            fresh one from ``z_train``, ``y_train`` and ``settings.seed``. Updated in place.
        prefer: Decodings to prefer for a point (e.g. the ones a table can score); see
            :func:`decode_most_common`.

    Returns:
        Every proposal with its score and source, and the best scored one. A proposal the
        evaluator answers ``"unscored"`` keeps value None; the GP data gets what
        ``settings.unscored`` says.
    """
    st = state if state is not None else BOState.start(z_train, y_train, settings.seed)
    with progress("latent BO", total=settings.iterations, completed=st.iteration) as bar:
        while st.iteration < settings.iterations:
            it = st.iteration
            cand, decoded = propose(model, st.x, st.y, is_valid, settings, it, st.generator, prefer=prefer)
            ok = [i for i, d in enumerate(decoded) if d is not None]
            answers = evaluator.evaluate(DagBatch.cat([decoded[i] for i in ok])) if ok else []
            worst = float(st.y.min())
            by_index = dict(zip(ok, answers))
            round_props, keep, gp_y = [], [], []
            for i in range(len(cand)):
                if i in by_index:
                    g = decoded[i]
                    adj, types = g.graphs()[0]
                    ans = by_index[i]
                    value = None if ans.source == UNSCORED else ans.value
                    round_props.append(Proposal(it, cand[i].tolist(), g.keys()[0], (adj.tolist(), types), value, ans.source))
                else:
                    round_props.append(Proposal(it, cand[i].tolist(), None, None, worst, INVALID))
                p = round_props[-1]
                if p.source != UNSCORED:
                    keep.append(i)
                    gp_y.append(p.value)
                elif settings.unscored == "worst":
                    keep.append(i)
                    gp_y.append(worst)
            st.proposals.extend(round_props)
            st.x = torch.cat([st.x, cand[keep]])
            st.y = torch.cat([st.y, torch.tensor(gp_y, dtype=torch.float64)])
            st.iteration += 1
            if on_iteration is not None:
                on_iteration(it, round_props)
            vals = [p.value for p in st.proposals if p.scored]
            bar.advance(1, best=max(vals) if vals else float("nan"))
    return st.result()
