"""Objectives, constraints and Pareto fronts of a cost-aware search.

A one-shot search takes, in its ``strategy`` section:

``constraints``
    Upper limits on measured costs (:data:`attnas.costs.config.COSTS`), e.g.
    ``{params: 1e6, latency_ms: 5}``. A candidate over any limit is rejected before it
    is scored: it never joins the population, and sampling or mutation draws another
    (``latent-bo``: its initial sample is drawn among feasible architectures, and a BO
    proposal over a limit enters the GP with the worst observed score).
``objectives``
    What the search trades off, e.g. ``[val_accuracy, params]``: the task's validation
    metric (``val_<metric>``, maximised) and any costs (minimised). With two or more
    (not ``latent-bo``) the search keeps a Pareto front: evolution picks its parents by
    NSGA-II's rank and crowding distance (pymoo's ``RankAndCrowding``), the run writes
    ``pareto.json`` with every front member, and ``attnas export RUN --pick ...`` writes
    a member's ``arch.json``.

The names are checked when the recipe is read (:func:`check_objectives`); the validation
metric's name is checked against the task before anything is written
(:func:`check_metric`). Non-dominated sorting and crowding come from pymoo (the optional
extra ``attnas[moo]``), which only a search with two or more objectives needs.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attnas.core.errors import ConfigError, did_you_mean
from attnas.costs.measure import COSTS

#: The run-directory file of a multi-objective search's front.
PARETO_FILE = "pareto.json"


def is_metric(name: str) -> bool:
    """Whether objective ``name`` is a validation metric (``val_<metric>``, maximised)."""
    return name.startswith("val_")


def check_objectives(objectives: Sequence[str] | None, constraints: dict | None) -> None:
    """Check ``strategy.objectives`` and ``strategy.constraints`` when a recipe is read.

    Args:
        objectives: Objective names (``None``: the validation metric alone).
        constraints: ``{cost name: upper limit}`` (``None``: no constraints).

    Raises:
        ConfigError: One line naming the first unknown name, repeated objective or bad limit.
    """
    valid = ", ".join(["val_<metric>", *COSTS])
    seen: set[str] = set()
    for i, name in enumerate(objectives or ()):
        if not (name in COSTS or (is_metric(name) and re.fullmatch(r"val_\w+", name))):
            raise ConfigError(f"strategy.objectives[{i}]: unknown objective {name!r}"
                              f"{did_you_mean(name, [*COSTS, 'val_accuracy'])}; valid: {valid}")
        if name in seen:
            raise ConfigError(f"strategy.objectives[{i}]: {name!r} is listed twice")
        seen.add(name)
    if objectives:
        metrics = [n for n in objectives if is_metric(n)]
        if len(metrics) != 1:
            raise ConfigError(f"strategy.objectives: name the validation metric exactly once (e.g. val_accuracy) "
                              f"besides the costs, got {list(objectives)}")
    normalize_constraints(constraints)


def normalize_constraints(constraints: dict | None) -> dict[str, float]:
    """``strategy.constraints`` with every limit a float (YAML reads ``1e6`` as a string).

    Raises:
        ConfigError: Naming an unknown cost or a limit that is not a number > 0.
    """
    out = {}
    for name, limit in (constraints or {}).items():
        if name not in COSTS:
            raise ConfigError(f"strategy.constraints.{name}: unknown cost{did_you_mean(str(name), COSTS)}; "
                              f"valid: {', '.join(COSTS)}")
        number = None
        if isinstance(limit, (int, float, str)) and not isinstance(limit, bool):
            try:
                number = float(limit)
            except ValueError:
                number = None
        if number is None or not math.isfinite(number) or number <= 0:
            raise ConfigError(f"strategy.constraints.{name}: the limit must be a number > 0, got {limit!r}")
        out[name] = number
    return out


def check_metric(objectives: Sequence[str] | None, metric: str) -> None:
    """Check that the validation objective names the task's metric (``val_<task.metric>``).

    Raises:
        ConfigError: Naming the objective and the task's metric.
    """
    for i, name in enumerate(objectives or ()):
        if is_metric(name) and name != f"val_{metric}":
            raise ConfigError(f"strategy.objectives[{i}]: {name!r} is not this task's validation metric; "
                              f"use 'val_{metric}'")


def cost_objectives(objectives: Sequence[str] | None) -> list[str]:
    """The costs among ``objectives``."""
    return [n for n in objectives or () if n in COSTS]


def objective_matrix(points: Sequence[dict], objectives: Sequence[str]) -> np.ndarray:
    """The ``(n, m)`` matrix to minimise: validation metrics negated, costs as they are.

    Args:
        points: ``{objective name: value}`` per point.
        objectives: The objective names, in column order.
    """
    return np.array([[-float(p[n]) if is_metric(n) else float(p[n]) for n in objectives] for p in points],
                    dtype=float).reshape(len(points), len(objectives))


def _pymoo():
    try:
        from pymoo.core.population import Population
        from pymoo.core.problem import Problem
        from pymoo.operators.survival.rank_and_crowding import RankAndCrowding
        from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting
    except ModuleNotFoundError as exc:
        raise ConfigError("strategy.objectives: a search with two or more objectives needs pymoo "
                          "(pip install 'attnas[moo]')") from exc
    return Population, Problem, RankAndCrowding, NonDominatedSorting


def require_pymoo() -> None:
    """Raise a one-line :class:`ConfigError` when pymoo is not installed (without importing it)."""
    import importlib.util

    if importlib.util.find_spec("pymoo") is None:
        raise ConfigError("strategy.objectives: a search with two or more objectives needs pymoo "
                          "(pip install 'attnas[moo]')")


def non_dominated(F: np.ndarray) -> list[int]:
    """Indices (ascending) of the rows of ``F`` that no other row dominates (minimisation).

    A row dominates another when it is no worse in every column and better in one; equal
    rows do not dominate each other, so duplicates of a front member are all kept.
    """
    if len(F) == 0:
        return []
    NonDominatedSorting = _pymoo()[3]
    return sorted(int(i) for i in NonDominatedSorting().do(np.asarray(F, dtype=float),
                                                            only_non_dominated_front=True))


def nsga2_select(F: np.ndarray, n: int, seed: int) -> list[int]:
    """NSGA-II's survivors: ``n`` row indices of ``F`` by non-dominated rank, then crowding distance.

    pymoo's ``RankAndCrowding`` survival (Deb et al., 2002): whole fronts in rank order
    while they fit, then the most spread-out members of the front that does not fit.
    Ties in crowding are broken by a generator seeded with ``seed``.

    Returns:
        The chosen indices, best rank first.
    """
    Population, Problem, RankAndCrowding, _ = _pymoo()
    F = np.asarray(F, dtype=float)
    if len(F) == 0 or n <= 0:
        return []
    pop = Population.new("F", F)
    problem = Problem(n_var=1, n_obj=F.shape[1])
    chosen = RankAndCrowding().do(problem, pop, n_survive=min(n, len(F)), return_indices=True,
                                  random_state=np.random.default_rng(seed))
    return [int(i) for i in chosen]


# ---------------------------------------------------------------------------------- picking

_CONDITION = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<=|>=|<|>|==)\s*([-+0-9.eE]+)\s*$")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}


def pick_member(front: dict, pick: str) -> dict:
    """The member of a ``pareto.json`` document that ``pick`` names.

    Args:
        front: The document.
        pick: A member's index (``"0"``: the first, the best validation score), or
            conditions on its values joined by commas (``"latency_ms<5"``,
            ``"params<=20000,val_accuracy>0.8"``), of which the member with the best
            validation score among those that meet all is picked.

    Raises:
        ConfigError: When the index is out of range, a condition is malformed or names
            an unknown value, or no member meets the conditions.
    """
    members = front["members"]
    text = pick.strip()
    if re.fullmatch(r"-?\d+", text):
        i = int(text)
        if not -len(members) <= i < len(members):
            raise ConfigError(f"--pick {pick}: the front has {len(members)} members (0 to {len(members) - 1})")
        return members[i]
    conditions = []
    for part in text.split(","):
        m = _CONDITION.match(part)
        if m is None:
            raise ConfigError(f"--pick {pick!r}: expected an index or conditions like 'latency_ms<5' "
                              f"(<, <=, >, >=, ==; joined by commas)")
        name, op, value = m.groups()
        known = sorted({k for mem in members for k in _values(mem)})
        if name not in known:
            raise ConfigError(f"--pick: unknown value {name!r}{did_you_mean(name, known)}; "
                              f"the front has {', '.join(known)}")
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"--pick {pick!r}: {value!r} is not a number") from None
        conditions.append((name, _OPS[op], number))
    ok = [mem for mem in members if all(n in _values(mem) and f(_values(mem)[n], v) for n, f, v in conditions)]
    if not ok:
        ranges = "; ".join(f"{n} from {min(_values(m)[n] for m in members):g} to {max(_values(m)[n] for m in members):g}"
                           for n in dict.fromkeys(c[0] for c in conditions))
        raise ConfigError(f"--pick {pick!r}: no member of the front meets it ({ranges})")
    metric = front.get("metric")
    return max(ok, key=lambda mem: (_values(mem).get(metric, 0.0), -mem["index"]))


def _values(member: dict) -> dict:
    return {**member.get("costs", {}), **member.get("objectives", {})}


def export_member(run_dir: str | Path, pick: str, out: str | Path) -> tuple[Path, dict]:
    """Write the ``arch.json`` of the front member ``pick`` names (``attnas export``).

    Args:
        run_dir: A run directory with a ``pareto.json``.
        pick: See :func:`pick_member`.
        out: Where to write the architecture.

    Returns:
        The written path and the picked member.

    Raises:
        RunDirError: When the run has no ``pareto.json``.
        ConfigError: When ``pick`` names no member.
    """
    from attnas.core.arch import Arch
    from attnas.runs.atomic_files import atomic_write_text
    from attnas.runs.run_dir import RunDir
    from attnas.core.errors import RunDirError

    run = RunDir.open(run_dir)
    if not run.exists(PARETO_FILE):
        raise RunDirError(f"{run.path} has no {PARETO_FILE} (a search with two or more strategy.objectives "
                          f"writes one when its search has finished)")
    front = run.read_json(PARETO_FILE)
    member = pick_member(front, pick)
    doc = member["arch"]
    arch = Arch(doc["space"], doc["choices"], meta={"pareto_index": member["index"], "run": str(run.path),
                                                    **{k: v for k, v in member["objectives"].items()}})
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, arch.to_json() + "\n")
    return out, member


def front_document(members: list[dict], objectives: Sequence[str], constraints: dict | None, metric: str,
                   context: dict | None = None) -> dict:
    """The ``pareto.json`` document (members sorted by validation score, best first).

    Args:
        members: ``{"arch": Arch document, "objectives": {...}, "costs": {...}, ...}`` each.
        objectives: The objective names.
        constraints: The constraints the search applied.
        metric: The validation objective's name (``val_<metric>``).
        context: How the costs were measured (device, threads, input size, protocol).
    """
    ordered = sorted(members, key=lambda m: -m["objectives"][metric])
    return {"objectives": list(objectives),
            "directions": ["max" if is_metric(n) else "min" for n in objectives],
            "metric": metric, "constraints": dict(constraints or {}), "measured": context or {},
            "members": [{"index": i, **m} for i, m in enumerate(ordered)]}
