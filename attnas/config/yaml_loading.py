"""The one YAML loader of everything a user writes: recipes, ``--set`` values, a run's config.yaml.

PyYAML's ``safe_load`` with four changes, each a way a user's file went wrong unnoticed or
took the machine with it:

- **YAML 1.2 numbers:** ``5e-3`` and ``1e4`` are numbers (YAML 1.1, which PyYAML follows,
  reads a float without a dot as a string);
- **duplicate keys are refused** (``retrain:`` twice in one mapping: PyYAML keeps the last
  without a word), naming the key and both lines;
- **bounded documents:** at most :data:`MAX_DEPTH` levels of nesting (deeper recursion
  raised ``RecursionError``) and at most :data:`MAX_NODES` values once aliases are
  expanded (a kilobyte "billion laughs" alias bomb expands to 10^9 values), counted on
  the composed node graph before anything is built from it;
- **integers bounded:** an integer literal of more than :data:`MAX_INT_DIGITS` digits is
  refused where it is read, with its line (Python refuses to convert 4,301 digits at all).

Every failure is a :class:`~attnas.core.errors.ConfigError` naming the source and the line.

A recipe file (``load_yaml(..., recipe=True)``) may also use two tags that say how it
extends its ``base:`` recipe (:mod:`attnas.config.recipe_merge`): ``!replace`` on a
mapping (:class:`Replace`) and ``!delete`` (:data:`DELETE`). Elsewhere they are errors.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from attnas.core.errors import ConfigError

#: Deepest nesting of mappings and lists a document may have.
MAX_DEPTH = 100
#: Most values (mappings, lists and scalars, aliases expanded) a document may hold.
MAX_NODES = 1_000_000
#: Longest integer literal, in digits (a 64-bit integer has 19).
MAX_INT_DIGITS = 100

#: YAML 1.2 core schema floats that YAML 1.1 reads as strings: an exponent without a dot
#: (``1e4``, ``5e-3``) or a dot with an exponent without a sign (``1.5e3``).
_YAML12_FLOAT = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")


class _Loader(yaml.SafeLoader):
    """SafeLoader with the checks of the module docstring (``source`` names the input)."""

    source = "YAML"

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(f"{self.source}: nested more than {MAX_DEPTH} levels deep "
                                  f"(at line {mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, Node] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = self.construct_object(key_node)
                if key in seen:
                    raise ConfigError(f"{self.source}: duplicate key '{key}' at line {key_node.start_mark.line + 1} "
                                      f"(first at line {seen[key].start_mark.line + 1}); keep one")
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise ConfigError(f"{self.source}: line {node.start_mark.line + 1}: an integer of {digits} digits; "
                              f"attnas reads integers of at most {MAX_INT_DIGITS} digits")
        return super().construct_yaml_int(node)


# Before _RecipeLoader copies the constructors (its add_constructor calls below): recipe files too
# get the integer bound.
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


class Replace(dict):
    """A recipe mapping tagged ``!replace``: it takes the place of its base's mapping instead
    of being merged into it."""


class _Delete:
    """The type of :data:`DELETE`."""

    def __repr__(self) -> str:
        return "!delete"


#: The value of a recipe key tagged ``!delete``: the key is removed from its base's mapping.
DELETE = _Delete()


class _RecipeLoader(_Loader):
    """:class:`_Loader` that also reads the ``!replace`` and ``!delete`` tags of a recipe."""

    def construct_replace(self, node: Node) -> Any:
        if not isinstance(node, MappingNode):
            raise ConfigError(f"{self.source}: line {node.start_mark.line + 1}: !replace is for a mapping "
                              "(a list or a value replaces its base's already)")
        data = Replace()
        yield data
        data.update(self.construct_mapping(node))

    def construct_delete(self, node: Node) -> _Delete:
        if not (isinstance(node, ScalarNode) and node.value == ""):
            raise ConfigError(f"{self.source}: line {node.start_mark.line + 1}: !delete takes no value "
                              "(write `key: !delete`)")
        return DELETE


_RecipeLoader.add_constructor("!replace", _RecipeLoader.construct_replace)
_RecipeLoader.add_constructor("!delete", _RecipeLoader.construct_delete)


class _Dumper(yaml.SafeDumper):
    """SafeDumper that quotes the strings :class:`_Loader` reads as numbers (``'1e5'``)."""


for _cls in (_Loader, _Dumper):
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))


def dump_yaml(data: Any) -> str:
    """``data`` as YAML that :func:`load_yaml` reads back as it is (keys in their order)."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False)


def _expanded_size(root: Node, source: str) -> int:
    """How many values the document of ``root`` holds with every alias expanded (each
    node's size is computed once, so an alias bomb is measured without expanding it)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        if not children_done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        sizes[id(node)] = 1 + sum(sizes.get(id(c), 0) for c in children)
        if sizes[id(node)] > MAX_NODES:
            raise ConfigError(f"{source}: more than {MAX_NODES:,} values once its aliases are expanded "
                              f"(at line {node.start_mark.line + 1}); write the values out or use fewer aliases")
    return sizes[id(root)]


def load_yaml(text: str, source: str, recipe: bool = False) -> Any:
    """Parse one YAML document with the checks of the module docstring.

    Args:
        text: The document.
        source: What the message names (``recipe.yaml``, ``--set 'retrain.lr=...'``).
        recipe: Read the ``!replace`` and ``!delete`` tags of a recipe file.

    Returns:
        The data (``None`` for an empty document).

    Raises:
        ConfigError: For a document deeper, larger or with a longer integer than allowed,
            or with a duplicate key.
        yaml.YAMLError: For malformed YAML (the caller names where).
    """
    loader = type("Loader", (_RecipeLoader if recipe else _Loader,), {"source": source})(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, source)
        return loader.construct_document(node)
    finally:
        loader.dispose()
