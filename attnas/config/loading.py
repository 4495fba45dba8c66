"""Reading recipes: shipped names and YAML files, ``base:``, ``--set`` overrides, and :func:`load_config`."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from attnas.config.recipe_merge import merge_recipe
from attnas.config.run import RunConfig, config_from_dict, nest_moved_keys
from attnas.config.yaml_loading import MAX_DEPTH, load_yaml
from attnas.core.errors import ConfigError, unknown_name
from attnas.core.text_files import decode_text


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``key.sub=value`` into a key path and a YAML-typed value."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value, e.g. space.hidden=128")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text[:80]!r}: empty key")
    if key.count(".") >= MAX_DEPTH:
        raise ConfigError(f"--set {key[:40]}...: a key of {key.count('.') + 1} parts; recipes nest at most "
                          f"{MAX_DEPTH} levels deep")
    try:
        value = load_yaml(raw, f"--set {key}") if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {text!r}: value is not valid YAML ({exc.__class__.__name__})") from None
    return key.split("."), value


def apply_overrides(data: dict, overrides: list[str] | tuple[str, ...]) -> dict:
    """Apply ``--set`` overrides to a raw recipe mapping (a deep copy is returned).

    Keys that moved into a nested section (:func:`~attnas.config.run.nest_moved_keys`) are
    put there first, and an override by the old flat key replaces the nested value.
    """
    data = nest_moved_keys(copy.deepcopy(data))
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
        data = nest_moved_keys(data, flat_wins=True)
    return data


#: Most recipes a chain of ``base:`` keys may pass through.
MAX_BASES = 32


def read_yaml(path: str | Path) -> dict:
    """Read a recipe file as one plain mapping, its ``base:`` chain resolved (:func:`resolve_base`).

    Syntax errors become a :class:`ConfigError` with the line.
    """
    path = Path(path)
    return resolve_base(read_own_mapping(path), path)


def read_own_mapping(path: Path) -> dict:
    """A recipe file's own mapping: its ``base:`` not resolved, ``!replace`` and ``!delete`` values as read."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read recipe {path}: {exc.strerror}") from None
    text = decode_text(raw, str(path), ConfigError)
    try:
        data = load_yaml(text, str(path), recipe=True)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: malformed YAML{where}: {problem}") from None
    if data is None:
        raise ConfigError(f"{path}: the file is empty; a recipe is a YAML mapping with name, task, space and "
                          "strategy (see `attnas show autoattend-cora-quick`)")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe must be a YAML mapping, got {type(data).__name__}")
    return data


def recipe_dir() -> Path:
    """The folder of the recipes that ship with attnas."""
    return Path(__file__).resolve().parents[1] / "recipes"


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
        raise ConfigError(unknown_name("recipe", recipe, list_recipes()))
    return shipped


def _base_path(base: Any, source: str, folder: Path) -> Path:
    """The file a recipe's ``base:`` value names: a shipped recipe name, or a YAML path
    (relative paths from ``folder``, the recipe's own)."""
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{source}: base must be a recipe name or a YAML path, got {base!r}")
    if base.endswith((".yaml", ".yml")) or "/" in base:
        path = folder / Path(base).expanduser()
        if not path.is_file():
            raise ConfigError(f"{source}: base {base!r}: recipe file {path} does not exist")
        return path
    shipped = recipe_dir() / f"{base}.yaml"
    if not shipped.is_file():
        raise ConfigError(f"{source}: base: {unknown_name('recipe', base, list_recipes())}")
    return shipped


def resolve_base(data: dict, path: Path | None = None, _chain: tuple[Path, ...] = ()) -> dict:
    """A recipe mapping with its ``base:`` chain resolved and merged (:mod:`attnas.config.recipe_merge`).

    Args:
        data: The recipe's own mapping (as :func:`read_own_mapping` returns it).
        path: Its file; a relative ``base`` path is taken from the file's folder (from the
            working directory for a mapping without a file).
        _chain: The files already on the way here (to report a cycle).

    Returns:
        A plain mapping without ``base``, flat keys that moved into a nested section put
        there (:func:`~attnas.config.run.nest_moved_keys`).

    Raises:
        ConfigError: For a base that is missing, not a recipe mapping, or extends itself
            again (a cycle), naming the recipe and the problem.
    """
    source = str(path) if path is not None else "recipe"
    if "base" not in data:
        return nest_moved_keys(merge_recipe({}, data, source))
    chain = (*_chain, path.resolve()) if path is not None else _chain
    base_path = _base_path(data["base"], source, path.parent if path is not None else Path.cwd())
    if base_path.resolve() in chain:
        cycle = " -> ".join(p.name for p in (*chain[chain.index(base_path.resolve()):], base_path.resolve()))
        raise ConfigError(f"{source}: base cycle {cycle}; a recipe cannot extend itself")
    if len(chain) >= MAX_BASES:
        raise ConfigError(f"{source}: more than {MAX_BASES} recipes in its chain of bases")
    try:
        base_data = read_own_mapping(base_path)
    except ConfigError as exc:
        raise ConfigError(f"{source}: base {data['base']!r} is not a usable recipe: {exc}") from None
    own = {k: v for k, v in data.items() if k != "base"}
    # a key the recipe sets by its old flat name replaces the base's nested value
    return nest_moved_keys(merge_recipe(resolve_base(base_data, base_path, chain), own, source), flat_wins=True)


def read_recipe(recipe: str | Path | dict) -> dict:
    """A recipe (shipped name, YAML path or mapping) as one plain mapping, its ``base:`` resolved."""
    if isinstance(recipe, dict):
        return resolve_base(recipe)
    return read_yaml(recipe_path(str(recipe)))


def load_config(recipe: str | Path | dict, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Load a recipe (name, path or mapping), apply overrides and validate.

    Args:
        recipe: A shipped recipe name, a YAML path, or an already-parsed mapping; its
            ``base:`` is resolved first (:func:`read_recipe`).
        overrides: ``key.sub=value`` strings, applied in order.

    Returns:
        The frozen, validated :class:`RunConfig`.
    """
    return config_from_dict(apply_overrides(read_recipe(recipe), list(overrides)))
