"""The rows of ``attnas compare``: the search, random search and the hand-designed baselines.

Each row is an ordinary recipe (a mapping) that differs from the searched recipe only in
what the comparison is about:

- ``search``: the recipe itself;
- ``random``: random search at the search's compute in the same space
  (:meth:`~attnas.strategies.base.Strategy.random_counterpart`: the same supernet and as
  many scored architectures for one-shot strategies; for DARTS, CAR-DARTS and mechanism
  search ``random-trained``, prior architectures each trained for a share of the search's
  epochs with the recipe's ``retrain`` optimiser, the best on validation kept);
- ``random-architecture`` (on request): one architecture drawn from the prior;
- one row per baseline the space declares (:meth:`~attnas.spaces.base.Space.baselines`),
  trained from scratch by the ``fixed`` strategy, with the training protocol of its own
  paper where the baseline declares one (``Baseline.retrain``), else the recipe's.

Both random rows draw from the architectures the search returns: the recipe's space with
:meth:`~attnas.strategies.base.Strategy.counterpart_space` (e.g. the cells of single heads
of a heterogeneous mechanism search, not homogeneous models).

Every row keeps the recipe's task and seed, so seed ``k`` of every row is retrained with
the same random seed and the rows are paired.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from attnas import registry
from attnas.config import RunConfig, load_config
from attnas.core.errors import ConfigError, UnsupportedError, unknown_name
from attnas.runs.build import build_space

#: Row names that baselines may not take.
RESERVED = ("search", "random", "random-architecture")


@dataclass(frozen=True)
class Row:
    """One row of a comparison.

    Attributes:
        name: ``search``, ``random``, ``random-architecture`` or the baseline's name (also
            its run folder's name).
        kind: ``search``, ``random``, ``random-architecture`` or ``baseline``.
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
              baselines: list[str] | tuple[str, ...] | None = None, random: bool = True,
              random_architecture: bool = False) -> tuple[RunConfig, list[Row]]:
    """The searched recipe's config and the rows that judge it (nothing is written).

    Args:
        recipe: A shipped recipe name, a YAML path or a mapping.
        overrides: ``--set`` overrides, applied to every row (e.g. the task's data).
        baselines: Which of the space's baselines to train (default: the recipe's
            ``compare.baselines``, else all the space declares).
        random: Whether to add the random-search row.
        random_architecture: Whether to add one architecture drawn from the prior.

    Raises:
        UnsupportedError: When the recipe does not search, its strategy trains no final
            model, or its space declares no baselines.
        ConfigError: When a baseline name is unknown.
    """
    config = load_config(recipe, overrides)
    strategy_cls = registry.get("strategy", config.strategy.name)
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
    drawn = {**base["space"], **strategy_cls.counterpart_space(config.strategy.options, space)}
    prior = space if drawn == base["space"] else build_space(load_config({**base, "space": drawn}))
    if random:
        section = strategy_cls.random_counterpart(config.strategy.options, prior, config.seed)
        if section is not None:
            rows.append(_random_row(base, section, drawn))
    if random_architecture:
        section = strategy_cls.random_architecture(prior, config.seed)
        rows.append(Row("random-architecture", "random-architecture",
                        _variant(base, "random-architecture", space=drawn, strategy=section, scratch=True),
                        "one architecture drawn from the prior"))
    for name in chosen:
        b = declared[name]
        space_section = copy.deepcopy(b.space) if b.space is not None else base["space"]
        recipe = _variant(base, name, space=space_section, strategy={"name": "fixed", "arch": copy.deepcopy(b.arch)},
                          scratch=True)
        if b.retrain:
            recipe["retrain"] = {**recipe["retrain"], **b.retrain}
        rows.append(Row(name, "baseline", recipe, b.description))
    for row in rows:  # every row is a valid recipe
        load_config(row.recipe)
    return config, rows


def _random_row(base: dict, section: dict, space: dict) -> Row:
    """The random-search row from the strategy's counterpart section, drawing from ``space``
    (the recipe's, with :meth:`~attnas.strategies.base.Strategy.counterpart_space`)."""
    section = copy.deepcopy(section)
    if section["name"] == "random-trained":
        own = {k: v for k, v in base["retrain"].items() if k not in ("init", "finetune_lr", "seeds")}
        section["train"] = {**own, **section.get("train", {})}
        what = (f"random search: {section['samples']} prior architectures trained {section['train']['epochs']} "
                f"epochs each, best on validation")
    elif section["name"] == "fixed":
        what = "one architecture drawn from the prior"
    else:
        what = f"random search: {section.get('samples', '?')} architectures scored ({section['name']})"
    scratch = section["name"] in ("fixed", "random-trained")  # no shared weights to start from
    return Row("random", "random", _variant(base, "random", space=space, strategy=section, scratch=scratch), what)


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
