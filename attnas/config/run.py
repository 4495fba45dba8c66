"""The run configuration: frozen dataclasses for a whole run and its training options.

A :class:`RunConfig` holds one :class:`ComponentConfig` per component section (the
registered ``name`` and its validated options), the retraining options
(:class:`TrainConfig`) and the comparison options (:class:`CompareConfig`).
:func:`config_from_dict` validates a recipe mapping into one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Literal

from attnas import registry
from attnas.config.values import (
    CheckedConfig,
    build_checked,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Seed,
    check_finite,
    coerce,
    from_mapping,
)
from attnas.config.moved_keys import nest_moved
from attnas.config.yaml_loading import dump_yaml
from attnas.core.errors import ConfigError, did_you_mean

def to_mapping(obj: Any) -> Any:
    """Turn a (nested) config dataclass back into plain YAML-able data."""
    if isinstance(obj, ComponentConfig):
        return {"name": obj.name, **to_mapping(obj.options)}
    if is_dataclass(obj):
        return {f.name: to_mapping(getattr(obj, f.name)) for f in fields(obj) if f.init}
    if isinstance(obj, (list, tuple)):
        return [to_mapping(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_mapping(v) for k, v in obj.items()}
    return obj


@dataclass(frozen=True)
class OptimConfig(CheckedConfig):
    """Optimiser options shared by every training loop.

    Attributes:
        lr: Learning rate.
        weight_decay: L2 penalty (decoupled for ``adamw``).
        optimizer: ``adam``, ``adamw`` or ``sgd``.
        momentum: SGD momentum.
        scheduler: ``none`` or ``cosine`` (annealed to ``lr_min``).
        lr_min: Final learning rate of the cosine schedule.
        batch_size: Mini-batch size where the task batches (ignored by full-batch tasks).
        grad_clip: Max gradient norm (0: no clipping).
    """

    lr: PositiveFloat = 0.005
    weight_decay: NonNegativeFloat = 5e-4
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    momentum: NonNegativeFloat = 0.9
    scheduler: Literal["none", "cosine"] = "none"
    lr_min: NonNegativeFloat = 0.0
    batch_size: PositiveInt = 128
    grad_clip: NonNegativeFloat = 0.0

    def optim_options(self) -> dict[str, Any]:
        """This object's optimiser fields (those of :class:`OptimConfig`) by name."""
        return {f.name: getattr(self, f.name) for f in fields(OptimConfig)}


@dataclass(frozen=True)
class TrainConfig(OptimConfig):
    """How a found architecture is (re)trained and evaluated (optimiser options: :class:`OptimConfig`).

    Attributes:
        epochs: Training epochs (full passes, or full-batch steps for transductive graphs).
        patience: Stop after this many epochs without a better validation score (0: never).
        init: ``supernet`` fine-tunes from the search's shared weights when the strategy has
            them; ``scratch`` trains from a fresh initialisation.
        finetune_lr: Learning rate of a fine-tuning from shared weights (``init: supernet``);
            ``None``: ``lr``. Training from scratch (``init: scratch``, the baselines of
            ``attnas compare``) always uses ``lr``.
        seeds: Default number of seeds for ``attnas retrain``.
        eval_every: Evaluate on the validation split every this many epochs.
    """

    epochs: PositiveInt = 200
    patience: NonNegativeInt = 100
    init: Literal["supernet", "scratch"] = "scratch"
    finetune_lr: PositiveFloat | None = None
    seeds: PositiveInt = 1
    eval_every: PositiveInt = 1


@dataclass(frozen=True)
class CompareConfig(CheckedConfig):
    """How ``attnas compare`` judges the recipe's search (see :mod:`attnas.comparison`).

    Attributes:
        baselines: The hand-designed baselines to compare against, by the names the space
            declares (:meth:`~attnas.spaces.base.Space.baselines`); ``None``: all of them.
        paper_seeds: How many seeds the paper averaged its table over (for the record).
        seeds: Retraining seeds per row when ``--seeds`` is not given. Ten make a 1-point
            gap detectable where the paired seed-to-seed spread is about a point (Cora:
            11-19 seeds were needed at the measured spread, docs/results/compare.md);
            recipes that need a GPU for one training set fewer.
        search_seeds: Independent searches per searching row when ``--search-seeds`` is not
            given (``None``: the strategy's default, 3 for one-shot strategies, whose search
            seed moves the result more than the retraining seed, 1 for the others).
    """

    baselines: list[str] | None = None
    paper_seeds: PositiveInt | None = None
    seeds: PositiveInt = 10
    search_seeds: PositiveInt | None = None


@dataclass(frozen=True)
class ComponentConfig(CheckedConfig):
    """A component section: the registered ``name`` and its validated ``options``."""

    name: str
    options: Any

    def get(self, key: str, default: Any = None) -> Any:
        """An option by name."""
        return getattr(self.options, key, default)


@dataclass(frozen=True)
class RunConfig(CheckedConfig):
    """A fully validated run: what to search, where, how, and how to retrain the result."""

    name: str
    task: ComponentConfig
    space: ComponentConfig
    strategy: ComponentConfig
    retrain: TrainConfig = field(default_factory=TrainConfig)
    compare: CompareConfig = field(default_factory=CompareConfig)
    seed: Seed = 0
    description: str = ""

    def to_dict(self) -> dict:
        """Plain data, as written to ``config.yaml``."""
        return to_mapping(self)

    def to_yaml(self) -> str:
        """The resolved config as YAML text."""
        return dump_yaml(self.to_dict())

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with top-level fields replaced, validated like a recipe.

        Raises:
            ConfigError: When a new value is invalid (e.g. a negative seed).
        """
        return config_from_dict({**self.to_dict(), **to_mapping(changes)})


_COMPONENT_KIND = {"task": "task", "space": "space", "strategy": "strategy"}
_TOP_KEYS = ("name", "description", "seed", "task", "space", "strategy", "retrain", "compare")


def _component(kind: str, data: Any) -> ComponentConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{kind}: expected a mapping with a 'name' key, got {data!r}")
    if "name" not in data:
        raise ConfigError(f"{kind}.name: required key is missing; valid: {', '.join(registry.names(kind))}")
    name = coerce(data["name"], str, f"{kind}.name")
    try:
        cls = registry.get(_COMPONENT_KIND[kind], name)
    except ConfigError as exc:
        raise ConfigError(f"{kind}.name: {exc}") from None
    options_cls = getattr(cls, "Config", None)
    opts = {k: v for k, v in data.items() if k != "name"}
    if options_cls is None:
        if opts:
            raise ConfigError(f"{kind}.{next(iter(opts))}: unknown key; {kind} '{name}' takes no options")
        return ComponentConfig(name, None)
    return ComponentConfig(name, from_mapping(options_cls, opts, kind))


def nest_moved_keys(data: Any, flat_wins: bool = False) -> Any:
    """A raw recipe mapping with every flat key that moved into a nested section put there.

    An options class lists such keys in ``moved_keys`` (e.g. the optimiser fields of
    ``mechanism-search``'s ``supernet``, now under ``supernet.optim``); a recipe, a ``--set``
    key or a run folder's ``config.yaml`` written before the move loads with the same
    meaning. Sections whose component name is unknown are left for
    :func:`config_from_dict` to report.

    Args:
        data: The recipe mapping (not changed; a changed copy is returned).
        flat_wins: A key given both flat and in its section keeps the flat value (a ``--set``
            of the old key over a nested mapping) instead of raising.

    Raises:
        ConfigError: When a key is given both ways and not ``flat_wins``.
    """
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for kind in _COMPONENT_KIND:
        section = out.get(kind)
        if not isinstance(section, dict) or not isinstance(section.get("name"), str):
            continue
        try:
            options_cls = getattr(registry.get(_COMPONENT_KIND[kind], section["name"]), "Config", None)
        except ConfigError:
            continue
        if options_cls is not None:
            out[kind] = nest_moved(options_cls, section, kind, flat_wins)
    for key, cls in (("retrain", TrainConfig), ("compare", CompareConfig)):
        if key in out:
            out[key] = nest_moved(cls, out[key], key, flat_wins)
    return out


def config_from_dict(data: Any) -> RunConfig:
    """Validate a recipe mapping into a :class:`RunConfig`.

    Every key, type and range is checked and no number may be NaN or infinite, so a
    config that validates cannot fail later for a bad value of one option.

    Raises:
        ConfigError: Naming the dotted key of the first problem.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"a recipe must be a YAML mapping, got {type(data).__name__}")
    data = nest_moved_keys(data)  # a run folder's config.yaml from before a move (recipes come nested)
    check_finite(data, "")
    for key in data:
        if key not in _TOP_KEYS:
            raise ConfigError(
                f"{key}: unknown key{did_you_mean(str(key), _TOP_KEYS)}; valid keys: {', '.join(_TOP_KEYS)}"
            )
    for key in ("name", "task", "space", "strategy"):
        if key not in data:
            raise ConfigError(f"{key}: required key is missing")
    return build_checked(RunConfig, dict(
        name=coerce(data["name"], str, "name"),
        description=coerce(data.get("description", ""), str, "description"),
        seed=coerce(data.get("seed", 0), Seed, "seed"),
        task=_component("task", data["task"]),
        space=_component("space", data["space"]),
        strategy=_component("strategy", data["strategy"]),
        retrain=from_mapping(TrainConfig, data.get("retrain"), "retrain"),
        compare=from_mapping(CompareConfig, data.get("compare"), "compare"),
    ))


