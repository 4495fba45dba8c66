"""Frozen run configurations from YAML recipes, with ``--set`` overrides and validation.

A recipe is a YAML document with four component sections and a few top-level keys::

    name: autoattend-cora
    seed: 0
    task:     {name: node-classification, dataset: cora}
    space:    {name: autoattend, layers: 2, hidden: 64, pool: pyg}
    strategy: {name: one-shot-evolution, supernet: {epochs: 2000}}
    retrain:  {epochs: 200, lr: 0.005}

Each component section names a registered component; the other keys of the section
are validated against that component's ``Config`` dataclass (unknown key, wrong type
and bad choice are reported with the dotted path of the key, e.g.
``space.hiden: unknown key (did you mean 'hidden'?)``). The result is a tree of frozen
dataclasses (:class:`RunConfig`), written back to the run directory fully resolved.

A recipe may extend another with a top-level ``base:`` (a shipped name or a YAML path from
the recipe's folder) and keep only its differences; :func:`read_recipe` resolves it
(the merge rules: :mod:`attnas.config.recipe_merge`).

The package has one module per purpose:

- :mod:`attnas.config.values`: the value types (:class:`Range` and its aliases) and the
  checks of a value against its type (:func:`coerce`, :func:`from_mapping`, :func:`check_fields`) and
  :class:`CheckedConfig`, the base of every options dataclass;
- :mod:`attnas.config.moved_keys`: nested sections that share another class's fields
  (:func:`with_defaults`) and the flat keys that moved into them (:func:`moved_into`);
- :mod:`attnas.config.run`: the run configuration (:class:`RunConfig`, :class:`TrainConfig`, ...);
- :mod:`attnas.config.loading`: recipes, ``base:``, ``--set`` overrides and :func:`load_config`;
- :mod:`attnas.config.recipe_merge`: how a recipe is laid over the recipe it extends (``base:``).

Everything is importable from ``attnas.config`` itself.
"""

from __future__ import annotations

from attnas.config.loading import (
    apply_overrides,
    list_recipes,
    load_config,
    parse_override,
    read_recipe,
    read_yaml,
    recipe_dir,
    recipe_path,
)
from attnas.config.run import (
    CompareConfig,
    ComponentConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
    config_from_dict,
    to_mapping,
)
from attnas.config.values import (
    CheckedConfig,
    Fraction,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Range,
    Seed,
    check_fields,
    check_finite,
    check_keyword_options,
    check_run_count,
    check_seeds,
    coerce,
    from_mapping,
)
from attnas.config.moved_keys import moved_into, with_defaults

__all__ = [
    "CheckedConfig", "CompareConfig", "ComponentConfig", "Fraction", "NonNegativeFloat", "NonNegativeInt", "OptimConfig",
    "PositiveFloat", "PositiveInt", "Range", "RunConfig", "Seed", "TrainConfig", "apply_overrides",
    "check_fields", "check_finite", "check_keyword_options", "check_run_count", "check_seeds", "coerce", "config_from_dict", "from_mapping", "list_recipes", "load_config",
    "parse_override", "read_recipe", "read_yaml", "recipe_dir", "recipe_path", "moved_into", "to_mapping",
    "with_defaults",
]
