"""Value types of config options and their validation.

Numeric options declare their valid range in their type, with ``typing.Annotated`` and a
:class:`Range` (aliases: :data:`PositiveInt`, :data:`NonNegativeInt`, :data:`PositiveFloat`,
:data:`NonNegativeFloat`, :data:`Fraction`, :data:`Seed`). :func:`from_mapping` checks every
value against its type while it reads a recipe, so ``strategy.evolution.parents: 0`` is
reported as ``strategy.evolution.parents: must be >= 1, got 0`` before anything is built or
written; :func:`check_fields` applies the same walk to a dataclass built in Python, and
:class:`CheckedConfig`, the base of every options dataclass, runs it as one is built. No
number anywhere in a config may be NaN or infinite.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
import math
import numbers
import types
import typing
from dataclasses import dataclass, fields, is_dataclass
from typing import Annotated, Any, Literal

from attnas.core.errors import ConfigError, did_you_mean

logger = logging.getLogger(__name__)

_NoneType = type(None)


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
        """Raise :class:`~attnas.core.errors.ConfigError` naming ``path`` when ``value`` is outside."""
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


#: The largest integer a config may hold (a 64-bit signed integer: what torch and NumPy take).
MAX_INT = 2**63 - 1


def check_finite(value: Any, path: str) -> None:
    """Refuse NaN and infinite numbers, and integers beyond 64 bits, anywhere in ``value``
    (nested mappings and lists too).

    Raises:
        ConfigError: Naming the dotted path of the first non-finite number or too large integer.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{path}: must be a finite number, got {value}")
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:
        raise ConfigError(f"{path}: an integer of {len(str(abs(value)))} digits does not fit in 64 bits "
                          f"(at most {MAX_INT})")
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
        args = typing.get_args(tp)
        if origin is tuple and len(args) > 1 and Ellipsis not in args:
            return "list of " + ", ".join(_type_name(a) for a in args)
        args = [a for a in args if a is not Ellipsis]
        return f"list of {_type_name(args[0])}" if args else "list"
    if tp is _NoneType:
        return "null"
    return getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any, path: str, *, suggest: bool = True) -> Any:
    """Check ``value`` against the type hint ``tp`` and convert it where lossless.

    The one walk of a value against its type: a recipe's values are read through it
    (:func:`from_mapping`) and an options object built in Python is checked with it
    (:func:`check_fields`).

    Args:
        value: A value read from YAML or a ``--set`` override, or a field of an options object.
        tp: The field's type hint.
        path: Dotted key, used in error messages.
        suggest: Whether a choice that is not valid gets a "did you mean" for the closest
            valid one (for a recipe's misspelling; not for a value set in code).

    Raises:
        ConfigError: When the value does not fit the type.
    """
    if tp is Any:
        check_finite(value, path)
        return value
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        value = coerce(value, base, path, suggest=suggest)
        for extra in extras:
            if isinstance(extra, Range) and value is not None:
                extra.check(value, path)
        return value
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            hint = did_you_mean(str(value), map(str, choices)) if suggest else ""
            raise ConfigError(
                f"{path}: {value!r} is not a valid choice{hint}; "
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
                return coerce(value, arg, path, suggest=suggest)
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
        if origin is tuple and len(args) > 1 and Ellipsis not in args:  # a fixed-length tuple: one type per place
            if len(value) != len(args):
                raise ConfigError(f"{path}: expected {len(args)} items, got {len(value)}: {value!r}")
            return tuple(coerce(v, t, f"{path}[{i}]", suggest=suggest) for i, (v, t) in enumerate(zip(value, args)))
        item_tp = args[0] if args else Any
        items = [coerce(v, item_tp, f"{path}[{i}]", suggest=suggest) for i, v in enumerate(value)]
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
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            if not (isinstance(value, float) and value.is_integer()):
                raise ConfigError(f"{path}: expected an integer, got {value!r}")
        value = int(value)
        check_finite(value, path)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
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
    retired = getattr(cls, "retired_keys", {})
    for key in [k for k in data if k in retired and k not in known]:
        logger.warning("%s%s: no longer an option, ignored (%s)", prefix, key, retired[key])
    data = {k: v for k, v in data.items() if k not in retired or k in known}
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
        obj = build_checked(cls, kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}" if path and not str(exc).startswith(path) else str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path or cls.__name__}: {exc}") from None
    return obj


@functools.lru_cache(maxsize=None)
def _checked_hints(cls: type) -> tuple[tuple[str, Any], ...]:
    """The init fields of ``cls`` whose type declares a :class:`Range` or a ``Literal``."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple((f.name, hints[f.name]) for f in fields(cls) if f.init and _declares_bounds(hints[f.name]))


def _declares_bounds(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return True
    if origin is Annotated:
        return any(isinstance(extra, Range) for extra in typing.get_args(tp)[1:])
    if origin in (typing.Union, types.UnionType, list, tuple):
        return any(_declares_bounds(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)
    return False


def check_fields(obj: Any, prefix: str = "") -> None:
    """Check the fields of a config dataclass against the ranges and choices their types declare.

    The same walk as a recipe's values get (:func:`coerce`), for an options object built in
    Python; :class:`CheckedConfig` runs it in ``__post_init__``. Checks that relate several
    fields stay in the subclass's ``__post_init__``.

    Args:
        obj: A dataclass instance.
        prefix: Put before each field name in messages (e.g. ``"csv."``).

    Raises:
        ConfigError: ``<prefix><field>: must be >= 1, got 0`` for the first field out of
            bounds, or ``must be a finite number`` for a NaN or infinite one.
    """
    for name, tp in _checked_hints(type(obj)):
        value = getattr(obj, name)
        if value is not None:
            coerce(value, tp, prefix + name, suggest=False)


#: The class :func:`from_mapping` is building from values it has already checked.
_PRECHECKED: contextvars.ContextVar[type | None] = contextvars.ContextVar("_PRECHECKED", default=None)


class CheckedConfig:
    """The base of every options dataclass: its fields are checked as it is built.

    ``__post_init__`` holds every field to the range or choices its type declares
    (:func:`check_fields`), so an options object built in Python meets the same bounds as a
    recipe; a recipe's values, already checked while they were read (:func:`from_mapping`),
    are not walked a second time. A subclass that also checks how its fields relate
    overrides ``__post_init__`` and calls ``super().__post_init__()`` before those checks
    (after normalising a field, e.g. a list to a tuple, where it does).

    Attributes:
        field_prefix: Put before each field name in messages (e.g. ``"space."``).
        retired_keys: Keys that were options once, each with why it is gone: a recipe or a
            run's saved config that sets one still loads; :func:`from_mapping` logs a warning
            and drops the key.
        moved_keys: Flat keys that moved into a nested section, each with the section's
            field name (``{"lr": "optim"}``): a recipe, ``--set`` key or saved config that
            sets ``lr`` flat still loads, with the value read as ``optim.lr``
            (:func:`attnas.config.run.nest_moved_keys` moves it as the mapping is read;
            :func:`from_mapping` reads nested mappings only).
    """

    field_prefix: typing.ClassVar[str] = ""
    retired_keys: typing.ClassVar[dict[str, str]] = {}
    moved_keys: typing.ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        if _PRECHECKED.get() is not type(self):
            check_fields(self, self.field_prefix)


def build_checked(cls: type, kwargs: dict) -> Any:
    """``cls(**kwargs)`` for values :func:`coerce` has already checked against ``cls``'s types
    (the range checks of :class:`CheckedConfig` are not run again; its relation checks are)."""
    token = _PRECHECKED.set(cls)
    try:
        return cls(**kwargs)
    finally:
        _PRECHECKED.reset(token)


#: Most runs one command may plan (seeds times grid points): each is a training.
MAX_RUNS = 10_000


def check_seeds(seeds: Any, option: str = "--seeds") -> int:
    """``--seeds`` of ``sweep``, ``compare`` and ``retrain`` (or another seed count, named by
    ``option``): an integer in 1..:data:`MAX_RUNS` (not a bool).

    Raises:
        ConfigError: Otherwise.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"{option} must be an integer >= 1, got {seeds!r}")
    check_run_count(seeds, f"{option} {seeds}")
    return seeds


def check_run_count(runs: int, what: str) -> None:
    """Refuse planning more than :data:`MAX_RUNS` runs (each one a training) in one command.

    Raises:
        ConfigError: ``<what>: <runs> runs, more than the 10,000 one command plans; ...``.
    """
    if runs > MAX_RUNS:
        raise ConfigError(f"{what}: {runs:,} runs, more than the {MAX_RUNS:,} one command plans; "
                          "split it into several commands")


def check_keyword_options(fn: Any, options: dict, component: str, path: str, reserved: tuple[str, ...] = ()) -> None:
    """Check a free-form option mapping against the keyword arguments ``fn`` accepts.

    Loaders that take ``**kwargs`` for options they share with others would otherwise
    drop a misspelt option without a word (``task.options.K`` for ``k``).

    Args:
        fn: The callable the options are passed to.
        options: The mapping from the recipe.
        component: What ``fn`` is, for the message (``dataset 'digits-graph'``).
        path: The dotted key of the mapping (``task.options``).
        reserved: Parameters the caller sets itself (not options).

    Raises:
        ConfigError: ``<path>.<key>: unknown option of <component> (did you mean ...?); valid: ...``.
    """
    import inspect

    params = inspect.signature(fn).parameters.values()
    accepted = sorted(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                      and p.name not in reserved)
    for key in options:
        if key not in accepted:
            raise ConfigError(f"{path}.{key}: unknown option of {component}{did_you_mean(str(key), accepted)}; "
                              f"valid: {', '.join(accepted) or 'none'}")
