"""Cost-aware one-shot search: objectives, constraints, measured costs and the Pareto front.

A one-shot strategy (:class:`attnas.strategies.one_shot_base._OneShot`) may search for
several objectives (the validation metric and measured costs, :mod:`attnas.costs.pareto`)
under upper limits on costs (``strategy.constraints``, measured by
:class:`attnas.costs.cost_model.CostModel`). :class:`CostAwareSearch` holds the strategy's
side of that: which costs are needed, admitting candidates that meet the constraints,
choosing parents by NSGA-II's survivors (Deb et al., 2002, IEEE TEVC) and writing
``pareto.json``; :func:`check_constraints_feasible` refuses constraints no drawn
architecture meets, before the supernet trains.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from attnas.core.arch import Arch
from attnas.core.errors import ArchError, ConfigError
from attnas.costs import pareto
from attnas.costs.cost_model import CostModel
from attnas.runs.rng import rng_state, set_rng_state
from attnas.spaces.base import prior_draws

#: Most architectures drawn, and seconds spent, looking for one that meets the constraints
#: before the supernet trains (:func:`check_constraints_feasible`).
FEASIBILITY_DRAWS, FEASIBILITY_SECONDS = 200, 5.0


def _needed(options: Any) -> int:
    """How many feasible architectures the strategy draws first (its population or initial sample)."""
    evolution = getattr(options, "evolution", None)
    return int(getattr(evolution, "population", None) or getattr(options, "initial", None)
               or getattr(options, "samples", None) or 1)


def _draw_budget(options: Any) -> int:
    """How many distinct architectures the strategy itself draws looking for its first ones:
    ``vae.samples`` (latent-bo, whose candidates are those), else ``50 n + 100`` for ``n``
    needed (:meth:`_OneShot.sample_unique`); at most :data:`FEASIBILITY_DRAWS`."""
    samples = getattr(getattr(options, "vae", None), "samples", None)
    return min(FEASIBILITY_DRAWS, int(samples) if samples else prior_draws(_needed(options)))


def example_batch_size(options: Any) -> int | None:
    """The batch size costs are measured at when ``costs.batch_size`` is unset: the
    supernet's (one-shot strategies) or the candidates' training batch (``random-trained``)."""
    owner = getattr(options, "supernet", None) or getattr(options, "train", None)
    return getattr(owner, "batch_size", None)


def reference_arch(options: Any, space: Any) -> Arch | None:
    """The architecture ``options.relative_to`` names (``None``: the limits are absolute).

    Raises:
        ConfigError: When it is not an architecture of ``space``.
    """
    reference = getattr(options, "relative_to", None)
    if not reference:
        return None
    arch = space.arch(reference)
    try:
        space.validate(arch)
    except ArchError as exc:
        raise ConfigError(f"strategy.relative_to: {exc}") from None
    return arch


def constrained_values(options: Any, space: Any, model: CostModel, arch: Arch) -> dict[str, float]:
    """The values of ``arch`` that ``options.constraints`` limit: its measured costs, or with
    ``relative_to`` their fractions of that architecture's, measured beside it
    (:meth:`~attnas.costs.cost_model.CostModel.relative`)."""
    names = list(getattr(options, "constraints", None) or {})
    reference = reference_arch(options, space)
    if reference is None:
        return model.costs(arch, names)
    return model.relative(arch, reference, names)


def describe_limits(options: Any) -> str:
    """``latency_ms <= 9.3`` (with ``relative_to``: ``latency_ms <= 0.5 x {...}'s``) per constraint."""
    reference = getattr(options, "relative_to", None)
    of = f" x {json.dumps(reference)}'s" if reference else ""
    return ", ".join(f"{k} <= {v:g}{of}" for k, v in options.constraints.items())


def check_constraints_feasible(options: Any, space: Any, task: Any) -> None:
    """Refuse constraints that no architecture drawn from the space meets, before the supernet trains.

    Costs depend on the architecture alone (not on trained weights), so they are measured
    on architectures drawn from the space's prior with a fixed seed (the random generators
    are left as they were) until one meets every constraint: as many distinct ones as the
    strategy would draw (:func:`_draw_budget`), at most :data:`FEASIBILITY_DRAWS`, for at
    most :data:`FEASIBILITY_SECONDS` seconds. When the clock, not the draws, ends the check
    (slow cost measurements, a busy machine timing latency), it has shown nothing: it
    refuses nothing and the search's own draws decide.

    Raises:
        ConfigError: ``strategy.constraints: only 0 of the N distinct architectures drawn meet ...``.
    """
    constraints = getattr(options, "constraints", None)
    if not constraints:
        return
    model = CostModel(space, task, None, options.costs, default_batch_size=example_batch_size(options))
    rng, seen, lowest = random.Random(0), set(), {}
    saved, start = rng_state(), time.perf_counter()
    try:
        budget = _draw_budget(options)
        for _ in range(10 * budget):
            if len(seen) >= budget:
                break
            arch = space.sample(rng)
            if arch.key() in seen:
                continue
            seen.add(arch.key())
            costs = constrained_values(options, space, model, arch)
            if all(costs[k] <= limit for k, limit in constraints.items()):
                return
            lowest = {k: min(costs[k], lowest.get(k, costs[k])) for k in constraints}
            if time.perf_counter() - start > FEASIBILITY_SECONDS:
                return  # inconclusive: too few drawn to refuse a recipe
    finally:
        set_rng_state(saved)
    smallest = ", ".join(f"{k} {v:g}" for k, v in lowest.items())
    raise ConfigError(f"strategy.constraints: only 0 of the {len(seen)} distinct architectures drawn meet "
                      f"{describe_limits(options)}, "
                      f"{_needed(options)} were needed (checked before training; the smallest drawn: {smallest}); "
                      "loosen the constraints")


class CostAwareSearch:
    """The objectives, constraints, costs and Pareto front of a search that scores
    candidates (a mixin of :class:`~attnas.strategies.one_shot_base._OneShot` and
    :class:`~attnas.strategies.random_trained.RandomTrained`, which set ``_cost_model``
    and ``rejected``; members are ``{"arch", "score", "stage", ...}``)."""

    def objectives(self) -> list[str]:
        """The objective names (default: the validation metric alone)."""
        return list(getattr(self.options, "objectives", None) or [f"val_{self.task.metric}"])

    def multi_objective(self) -> bool:
        """Whether the search keeps a Pareto front (two or more objectives)."""
        return len(self.objectives()) >= 2

    def cost_names(self) -> list[str]:
        """The costs the objectives and constraints need (none: nothing is measured)."""
        constraints = getattr(self.options, "constraints", None) or {}
        return list(dict.fromkeys([*pareto.cost_objectives(self.objectives()), *constraints]))

    def cost_model(self) -> CostModel:
        """The measured costs of candidates, cached in the run directory (``costs.jsonl``)."""
        if self._cost_model is None:
            self._cost_model = CostModel(self.space, self.task, self.run, self.options.costs,
                                         default_batch_size=example_batch_size(self.options))
        return self._cost_model

    def costs(self, arch: Arch) -> dict:
        """The costs of ``arch`` the search needs (:meth:`cost_names`; ``{}`` when none)."""
        names = self.cost_names()
        return self.cost_model().costs(arch, names) if names else {}

    def cost_entry(self, arch: Arch) -> dict:
        """``{"costs": ...}`` for a scored candidate's event and population entry (``{}``
        without costs); measured when the candidate was admitted, so read from the cache."""
        costs = self.costs(arch)
        if costs and getattr(self.options, "relative_to", None):  # the constrained fractions, as admitted
            return {"costs": costs, "relative": constrained_values(self.options, self.space, self.cost_model(), arch)}
        return {"costs": costs} if costs else {}

    def cost_metrics(self, best: dict) -> dict:
        """The metrics of a search with costs: the chosen member's costs, how many distinct
        candidates were rejected, the seconds spent measuring, with ``latency_ms`` how it was
        measured (``costs_latency``: ``network`` or ``operations``, ``auto`` resolved) and
        with ``relative_to`` its fractions of that architecture's costs (``relative_<cost>``);
        ``{}`` without costs."""
        names = self.cost_names()
        if not names:
            return {}
        how = {"costs_latency": self.cost_model().latency} if "latency_ms" in names else {}
        if "relative" in best:  # the chosen member's fractions of relative_to's costs
            how.update({f"relative_{k}": round(v, 4) for k, v in best["relative"].items()})
        return {**best.get("costs", {}), "rejected": len(self.rejected),
                "costs_seconds": round(self.cost_model().total_seconds, 2), **how}

    def admit(self, arch: Arch) -> bool:
        """Whether ``arch`` meets every constraint; a rejected one is logged and remembered."""
        constraints = getattr(self.options, "constraints", None)
        if not constraints:
            return True
        values = constrained_values(self.options, self.space, self.cost_model(), arch)
        over = {k: values[k] for k, limit in constraints.items() if values[k] > limit}
        if not over:
            return True
        self.rejected.add(arch.key())
        relative = {"relative": values} if getattr(self.options, "relative_to", None) else {}
        self.run.log({"phase": "rejected", "arch": arch.choices, "costs": self.costs(arch), **relative,
                      "over": sorted(over)})
        return False

    def objective_values(self, member: dict) -> dict:
        """``{objective: value}`` of a population member (its score and its costs)."""
        values = {f"val_{self.task.metric}": member["score"], **member.get("costs", {})}
        return {n: values[n] for n in self.objectives()}

    def pareto_front(self, population: list[dict]) -> list[dict]:
        """The population's members that no other dominates on the objectives, in population order."""
        F = pareto.objective_matrix([self.objective_values(p) for p in population], self.objectives())
        return [dict(population[i], population_index=i) for i in pareto.non_dominated(F)]

    def select_parents(self, population: list[dict], n: int, stage: int) -> list[dict]:
        """The ``n`` parents of a round: the best scores, or with two or more objectives
        NSGA-II's survivors (non-dominated rank, then crowding distance)."""
        if not self.multi_objective():
            return sorted(population, key=lambda p: -p["score"])[:n]
        F = pareto.objective_matrix([self.objective_values(p) for p in population], self.objectives())
        return [population[i] for i in pareto.nsga2_select(F, n, seed=self.seed + stage)]

    def write_front(self, front: list[dict], chosen: dict) -> None:
        """Write ``pareto.json``: every front member's architecture, objectives and costs."""
        context = {k: v for k, v in self.cost_model().context().items() if k != "space"}
        if getattr(self.options, "relative_to", None):
            context["constraints_relative_to"] = self.options.relative_to  # the limits are fractions of its costs
        members = [{"arch": Arch(self.space.name, m["arch"]).to_dict(), "objectives": self.objective_values(m),
                    "costs": m.get("costs", {}), "stage": m["stage"], "population_index": m["population_index"],
                    "chosen": m["arch"] == chosen["arch"]} for m in front]
        self.run.write_json(pareto.PARETO_FILE, pareto.front_document(
            members, self.objectives(), getattr(self.options, "constraints", None), f"val_{self.task.metric}",
            context))
