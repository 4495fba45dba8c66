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

Numeric options declare their valid range in their type, with ``typing.Annotated`` and a
:class:`Range` (aliases: :data:`PositiveInt`, :data:`NonNegativeInt`, :data:`PositiveFloat`,
:data:`NonNegativeFloat`, :data:`Fraction`, :data:`Seed`); the loader checks every value
against it while it reads the recipe, so ``strategy.evolution.parents: 0`` is reported as
``strategy.evolution.parents: must be >= 1, got 0`` before anything is built or written.
No number anywhere in a config may be NaN or infinite.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml

from attnas import _registry
from attnas.errors import ConfigError, did_you_mean

_NoneType = type(None)


# --------------------------------------------------------------------------- generic validation


class _OutOfRange(ConfigError):
    """A value of the right type outside its field's :class:`Range`."""


@dataclass(frozen=True)
class Range:
    """The valid interval of a numeric option, attached to its type with ``typing.Annotated``.

    Example:
        ``warmup: Annotated[float, Range(0, 1, high_open=True)] = 0.0`` accepts ``0 <= warmup < 1``.

    Attributes:
        low: Lower bound (``None``: unbounded).
        high: Upper bound (``None``: unbounded).
        low_open: Whether ``low`` itself is excluded.
        high_open: Whether ``high`` itself is excluded.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the interval."""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return True

    def describe(self) -> str:
        """The interval in words, e.g. ``>= 1`` or ``in [0, 1)``."""
        if self.low is not None and self.high is not None:
            return (f"in {'(' if self.low_open else '['}{self.low}, {self.high}"
                    f"{')' if self.high_open else ']'}")
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high}"
        return "any number"

    def check(self, value: float, path: str) -> None:
        """Raise :class:`~attnas.errors.ConfigError` naming ``path`` when ``value`` is outside."""
        if not self.contains(value):
            raise _OutOfRange(f"{path}: must be {self.describe()}, got {value!r}")


#: A count or size: an integer >= 1.
PositiveInt = Annotated[int, Range(1)]
#: An integer >= 0 (a count where 0 means "none" or "off").
NonNegativeInt = Annotated[int, Range(0)]
#: A number > 0 (a learning rate, a scale).
PositiveFloat = Annotated[float, Range(0, low_open=True)]
#: A number >= 0 (a weight decay, a clipping norm where 0 means "off").
NonNegativeFloat = Annotated[float, Range(0)]
#: A probability or a share in [0, 1) (a dropout rate, a held-out fraction).
Fraction = Annotated[float, Range(0, 1, high_open=True)]
#: A random seed: an integer in [0, 2**63 - 1].
Seed = Annotated[int, Range(0, 2**63 - 1)]


def check_finite(value: Any, path: str) -> None:
    """Refuse NaN and infinite numbers anywhere in ``value`` (nested mappings and lists too).

    Raises:
        ConfigError: Naming the dotted path of the first non-finite number.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{path}: must be a finite number, got {value}")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_finite(v, f"{path}[{i}]")


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _type_name(typing.get_args(tp)[0])
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return f"list of {_type_name(args[0])}" if args else "list"
    if tp is _NoneType:
        return "null"
    return getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any, path: str) -> Any:
    """Check ``value`` against the type hint ``tp`` and convert it where lossless.

    Args:
        value: A value read from YAML or a ``--set`` override.
        tp: The field's type hint.
        path: Dotted key, used in error messages.

    Raises:
        ConfigError: When the value does not fit the type.
    """
    if tp is Any:
        check_finite(value, path)
        return value
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        value = coerce(value, base, path)
        for extra in extras:
            if isinstance(extra, Range) and value is not None:
                extra.check(value, path)
        return value
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(
                f"{path}: {value!r} is not a valid choice{did_you_mean(str(value), map(str, choices))}; "
                f"valid: {', '.join(map(str, choices))}"
            )
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and _NoneType in args:
            return None
        out_of_range = None
        for arg in args:
            if arg is _NoneType:
                continue
            try:
                return coerce(value, arg, path)
            except _OutOfRange as exc:
                out_of_range = out_of_range or exc
            except ConfigError:
                pass
        if out_of_range is not None:
            raise out_of_range
        raise ConfigError(f"{path}: expected {_type_name(tp)}, got {value!r}")
    if origin in (list, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected {_type_name(tp)}, got {value!r}")
        args = typing.get_args(tp)
        item_tp = args[0] if args else Any
        items = [coerce(v, item_tp, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        check_finite(value, path)
        return dict(value)
    if is_dataclass(tp):
        return from_mapping(tp, value, path)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{path}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:
            raise ConfigError(f"{path}: must be a finite number, got {value!r}") from None
        check_finite(number, path)
        return number
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{path}: expected {_type_name(tp)}, got {value!r}")
    return value


def from_mapping(cls: type, data: Any, path: str = "") -> Any:
    """Build the frozen dataclass ``cls`` from a mapping, validating every key.

    Args:
        cls: A dataclass type.
        data: A mapping (``None`` means all defaults).
        path: Dotted prefix for error messages.

    Raises:
        ConfigError: Naming the unknown, missing or ill-typed key.
    """
    prefix = f"{path}." if path else ""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls, include_extras=True)
    known = {f.name: f for f in fields(cls) if f.init}
    for key in data:
        if key not in known:
            raise ConfigError(
                f"{prefix}{key}: unknown key{did_you_mean(str(key), known)}; valid keys: {', '.join(sorted(known))}"
            )
    kwargs = {}
    for name, f in known.items():
        if name in data:
            kwargs[name] = coerce(data[name], hints[name], prefix + name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{name}: required key is missing")
    try:
        obj = cls(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}" if path and not str(exc).startswith(path) else str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path or cls.__name__}: {exc}") from None
    return obj


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


# --------------------------------------------------------------------------- the run config


@dataclass(frozen=True)
class OptimConfig:
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

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ConfigError(f"lr: must be > 0, got {self.lr}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size: must be >= 1, got {self.batch_size}")
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise ConfigError("weight_decay and grad_clip must be >= 0")
        if getattr(self, "epochs", 1) < 0:
            raise ConfigError(f"epochs: must be >= 0, got {self.epochs}")


@dataclass(frozen=True)
class TrainConfig(OptimConfig):
    """How a found architecture is (re)trained and evaluated (optimiser options: :class:`OptimConfig`).

    Attributes:
        epochs: Training epochs (full passes, or full-batch steps for transductive graphs).
        patience: Stop after this many epochs without a better validation score (0: never).
        init: ``supernet`` fine-tunes from the search's shared weights when the strategy has
            them; ``scratch`` trains from a fresh initialisation.
        seeds: Default number of seeds for ``attnas retrain``.
        eval_every: Evaluate on the validation split every this many epochs.
    """

    epochs: PositiveInt = 200
    patience: NonNegativeInt = 100
    init: Literal["supernet", "scratch"] = "scratch"
    seeds: PositiveInt = 1
    eval_every: PositiveInt = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("epochs", "seeds", "eval_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class CompareConfig:
    """How ``attnas compare`` judges the recipe's search (see :mod:`attnas.comparison`).

    Attributes:
        baselines: The hand-designed baselines to compare against, by the names the space
            declares (:meth:`~attnas.spaces.base.Space.baselines`); ``None``: all of them.
        paper_seeds: How many seeds the paper averaged its table over (for the record).
    """

    baselines: list[str] | None = None
    paper_seeds: PositiveInt | None = None


@dataclass(frozen=True)
class ComponentConfig:
    """A component section: the registered ``name`` and its validated ``options``."""

    name: str
    options: Any

    def get(self, key: str, default: Any = None) -> Any:
        """An option by name."""
        return getattr(self.options, key, default)


@dataclass(frozen=True)
class RunConfig:
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
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

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
        raise ConfigError(f"{kind}.name: required key is missing; valid: {', '.join(_registry.names(kind))}")
    name = coerce(data["name"], str, f"{kind}.name")
    try:
        cls = _registry.get(_COMPONENT_KIND[kind], name)
    except ConfigError as exc:
        raise ConfigError(f"{kind}.name: {exc}") from None
    options_cls = getattr(cls, "Config", None)
    opts = {k: v for k, v in data.items() if k != "name"}
    if options_cls is None:
        if opts:
            raise ConfigError(f"{kind}.{next(iter(opts))}: unknown key; {kind} '{name}' takes no options")
        return ComponentConfig(name, None)
    return ComponentConfig(name, from_mapping(options_cls, opts, kind))


def config_from_dict(data: Any) -> RunConfig:
    """Validate a recipe mapping into a :class:`RunConfig`.

    Every key, type and range is checked and no number may be NaN or infinite, so a
    config that validates cannot fail later for a bad value of one option.

    Raises:
        ConfigError: Naming the dotted key of the first problem.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"a recipe must be a YAML mapping, got {type(data).__name__}")
    check_finite(data, "")
    for key in data:
        if key not in _TOP_KEYS:
            raise ConfigError(
                f"{key}: unknown key{did_you_mean(str(key), _TOP_KEYS)}; valid keys: {', '.join(_TOP_KEYS)}"
            )
    for key in ("name", "task", "space", "strategy"):
        if key not in data:
            raise ConfigError(f"{key}: required key is missing")
    return RunConfig(
        name=coerce(data["name"], str, "name"),
        description=coerce(data.get("description", ""), str, "description"),
        seed=coerce(data.get("seed", 0), Seed, "seed"),
        task=_component("task", data["task"]),
        space=_component("space", data["space"]),
        strategy=_component("strategy", data["strategy"]),
        retrain=from_mapping(TrainConfig, data.get("retrain"), "retrain"),
        compare=from_mapping(CompareConfig, data.get("compare"), "compare"),
    )


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``key.sub=value`` into a key path and a YAML-typed value."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value, e.g. space.hidden=128")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {text!r}: value is not valid YAML ({exc.__class__.__name__})") from None
    return key.split("."), value


def apply_overrides(data: dict, overrides: list[str] | tuple[str, ...]) -> dict:
    """Apply ``--set`` overrides to a raw recipe mapping (a deep copy is returned)."""
    import copy

    data = copy.deepcopy(data)
    for text in overrides or ():
        path, value = parse_override(text)
        node = data
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(f"--set {text}: {'.'.join(path[: i + 1])} is not a section")
            node = child
        node[path[-1]] = value
    return data


def read_yaml(path: str | Path) -> dict:
    """Read a YAML mapping, turning syntax errors into :class:`ConfigError` with the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read recipe {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a UTF-8 text file (byte 0x{exc.object[exc.start]:02x} at "
                          f"offset {exc.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: malformed YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe must be a YAML mapping, got {type(data).__name__}")
    return data


def recipe_dir() -> Path:
    """The folder of the recipes that ship with attnas."""
    return Path(__file__).resolve().parent / "recipes"


def list_recipes() -> list[str]:
    """Names of the shipped recipes."""
    return sorted(p.stem for p in recipe_dir().glob("*.yaml"))


def recipe_path(recipe: str) -> Path:
    """Resolve a recipe name or a path to a YAML file."""
    p = Path(recipe)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise ConfigError(f"recipe file {p} does not exist")
        return p
    shipped = recipe_dir() / f"{recipe}.yaml"
    if not shipped.exists():
        from attnas.errors import unknown_name

        raise ConfigError(unknown_name("recipe", recipe, list_recipes()))
    return shipped


def load_config(recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Load a recipe (name, path or mapping), apply overrides and validate.

    Args:
        recipe: A shipped recipe name, a YAML path, or an already-parsed mapping.
        overrides: ``key.sub=value`` strings, applied in order.

    Returns:
        The frozen, validated :class:`RunConfig`.
    """
    data = dict(recipe) if isinstance(recipe, dict) else read_yaml(recipe_path(str(recipe)))
    return config_from_dict(apply_overrides(data, list(overrides)))
