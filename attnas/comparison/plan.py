"""The rows of ``attnas compare``: the search, random search and the hand-designed baselines.

Each row is an ordinary recipe (a mapping) that differs from the searched recipe only in
what the comparison is about:

- ``search``: the recipe itself;
- ``random``: the strategy's random counterpart in the same space
  (:meth:`~attnas.strategies.base.Strategy.random_counterpart`: the same supernet and as
  many scored architectures for one-shot strategies, one draw from the prior for DARTS);
- one row per baseline the space declares (:meth:`~attnas.spaces.base.Space.baselines`),
  trained from scratch by the ``fixed`` strategy.

Every row keeps the recipe's task, seed and ``retrain`` section (one shared training
budget; rows without shared weights train from scratch), so seed ``k`` of every row is
retrained with the same random seed and the rows are paired.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from attnas import _registry
from attnas.build import build_space
from attnas.config import RunConfig, load_config
from attnas.errors import ConfigError, UnsupportedError, unknown_name

#: Row names that baselines may not take.
RESERVED = ("search", "random")


@dataclass(frozen=True)
class Row:
    """One row of a comparison.

    Attributes:
        name: ``search``, ``random`` or the baseline's name (also its run folder's name).
        kind: ``search``, ``random`` or ``baseline``.
        recipe: The full recipe mapping the row's run is made from.
        description: One line for the table.
    """

    name: str
    kind: str
    recipe: dict
    description: str

    def to_dict(self) -> dict:
        """Plain data for ``compare-plan.json``."""
        return {"name": self.name, "kind": self.kind, "recipe": self.recipe, "description": self.description}


def plan_rows(recipe: str | dict, overrides: list[str] | tuple[str, ...] = (),
              baselines: list[str] | tuple[str, ...] | None = None, random: bool = True) -> tuple[RunConfig, list[Row]]:
    """The searched recipe's config and the rows that judge it (nothing is written).

    Args:
        recipe: A shipped recipe name, a YAML path or a mapping.
        overrides: ``--set`` overrides, applied to every row (e.g. the task's data).
        baselines: Which of the space's baselines to train (default: the recipe's
            ``compare.baselines``, else all the space declares).
        random: Whether to add the random-search row.

    Raises:
        UnsupportedError: When the recipe does not search, its strategy trains no final
            model, or its space declares no baselines.
        ConfigError: When a baseline name is unknown.
    """
    config = load_config(recipe, overrides)
    strategy_cls = _registry.get("strategy", config.strategy.name)
    if config.strategy.name == "fixed":
        raise UnsupportedError(f"recipe '{config.name}' trains a fixed architecture (strategy 'fixed'); "
                               "compare needs a recipe that searches")
    if not strategy_cls.final_training:
        raise UnsupportedError(f"strategy '{config.strategy.name}' ends in its own evaluation and trains no "
                               "architecture; compare needs a strategy whose result is trained")
    space = build_space(config)
    declared = space.baselines()
    if not declared:
        raise UnsupportedError(f"space '{config.space.name}' declares no hand-designed baselines to compare against")
    for name in declared:
        if name in RESERVED:
            raise ConfigError(f"space '{config.space.name}' declares a baseline named '{name}', a reserved row name")
    chosen = list(baselines if baselines is not None else (config.compare.baselines or declared))
    if not chosen:
        raise ConfigError(f"no baselines chosen; the space declares: {', '.join(declared)}")
    for name in chosen:
        if name not in declared:
            raise ConfigError(unknown_name(f"baseline of space '{config.space.name}'", name, list(declared)))
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"baselines: repeated names in {chosen}")

    base = config.to_dict()
    rows = [Row("search", "search", base, f"{config.strategy.name} search")]
    if random:
        section = strategy_cls.random_counterpart(config.strategy.options, space, config.seed)
        if section is not None:
            what = ("one architecture drawn from the prior" if section["name"] == "fixed"
                    else f"{section['name']}, {section.get('samples', '?')} architectures scored")
            rows.append(Row("random", "random", _variant(base, "random", strategy=section, scratch=section["name"] == "fixed"),
                            f"random search ({what})"))
    for name in chosen:
        b = declared[name]
        space_section = copy.deepcopy(b.space) if b.space is not None else base["space"]
        rows.append(Row(name, "baseline", _variant(base, name, space=space_section,
                                                   strategy={"name": "fixed", "arch": copy.deepcopy(b.arch)},
                                                   scratch=True), b.description))
    for row in rows:  # every row is a valid recipe
        load_config(row.recipe)
    return config, rows


def _variant(base: dict, row: str, space: dict | None = None, strategy: dict | None = None,
             scratch: bool = False) -> dict:
    out = copy.deepcopy(base)
    out["name"] = f"{base['name']}-{row}"
    if space is not None:
        out["space"] = space
    if strategy is not None:
        out["strategy"] = strategy
    if scratch:
        out["retrain"] = {**out["retrain"], "init": "scratch"}
    return out
