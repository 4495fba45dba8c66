"""Architectures as plain data.

An :class:`Arch` is a small JSON document::

    {"space": "autoattend", "version": 1, "choices": {...}}

``choices`` is owned by the space that created it (see each space's docstring for its
layout); attnas never pickles an architecture. :func:`load_arch` checks the document's
shape and, given a space, its meaning (:meth:`attnas.spaces.base.Space.validate`), so a
hand-edited file with an unknown operation fails with a message that names it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnas.core.errors import ArchError
from attnas.core.text_files import decode_text

ARCH_VERSION = 1


_MAX_DEPTH = 64


def _freeze(value: Any, depth: int = 0) -> Any:
    """Check that ``value`` is JSON data (and copy it), so an Arch stays plain data."""
    if depth > _MAX_DEPTH:
        raise ArchError(f"choices: nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise ArchError(f"choices: keys must be strings, got {k!r}")
        return {k: _freeze(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_freeze(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ArchError(f"choices: {value!r} is not JSON data (JSON numbers are finite)")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ArchError(f"choices: {value!r} is not JSON data ({type(value).__name__})")


@dataclass(frozen=True)
class Arch:
    """A discrete architecture of a space.

    Attributes:
        space: The registered name of the space the choices belong to.
        choices: JSON data describing the architecture; its layout is the space's.
        version: Format version of the document.
        meta: Optional free-form JSON data (e.g. where the arch came from); not part of identity.
    """

    space: str
    choices: dict
    version: int = ARCH_VERSION
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.space, str) or not self.space:
            raise ArchError(f"space: expected a non-empty string, got {self.space!r}")
        if not isinstance(self.choices, dict):
            raise ArchError(f"choices: expected a JSON object, got {type(self.choices).__name__}")
        object.__setattr__(self, "choices", _freeze(self.choices))
        object.__setattr__(self, "meta", _freeze(dict(self.meta or {})))

    def key(self) -> str:
        """A canonical string identifying the architecture (for de-duplication)."""
        return json.dumps({"space": self.space, "choices": self.choices}, sort_keys=True, separators=(",", ":"))

    def __hash__(self) -> int:
        return hash(self.key())

    def to_dict(self) -> dict:
        """The JSON document."""
        doc = {"space": self.space, "version": self.version, "choices": self.choices}
        if self.meta:
            doc["meta"] = self.meta
        return doc

    def to_json(self, indent: int | None = 2) -> str:
        """The JSON document as text."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, doc: Any, source: str = "arch") -> Arch:
        """Check the document's shape and build an Arch.

        Args:
            doc: The parsed JSON document.
            source: Where it came from, for messages.

        Raises:
            ArchError: When a key is missing, unknown or of the wrong type.
        """
        if not isinstance(doc, dict):
            raise ArchError(f"{source}: expected a JSON object, got {type(doc).__name__}")
        allowed = {"space", "version", "choices", "meta"}
        for k in doc:
            if k not in allowed:
                raise ArchError(f"{source}: unknown key '{k}'; valid keys: {', '.join(sorted(allowed))}")
        for k in ("space", "choices"):
            if k not in doc:
                raise ArchError(f"{source}: missing key '{k}'")
        version = doc.get("version", ARCH_VERSION)
        if isinstance(version, bool) or not isinstance(version, int):
            raise ArchError(f"{source}: version must be an integer, got {version!r}")
        if version != ARCH_VERSION:
            raise ArchError(f"{source}: unsupported arch version {version} (this attnas reads version {ARCH_VERSION})")
        meta = doc.get("meta", {})
        if not isinstance(meta, dict):
            raise ArchError(f"{source}: meta must be a JSON object")
        try:
            return cls(space=doc["space"], choices=doc["choices"], version=version, meta=meta)
        except ArchError as exc:
            raise ArchError(f"{source}: {exc}") from None

    @classmethod
    def from_json(cls, text: str, source: str = "arch") -> Arch:
        """Parse JSON text; malformed JSON raises :class:`ArchError` with the position."""
        try:
            doc = json.loads(text, object_pairs_hook=_unique_keys)
        except ArchError as exc:
            raise ArchError(f"{source}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ArchError(f"{source}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise ArchError(f"{source}: JSON nested too deeply") from None
        except ValueError as exc:  # e.g. an integer of more than 4,300 digits
            raise ArchError(f"{source}: unreadable JSON: {str(exc).split(';')[0]}") from None
        return cls.from_dict(doc, source)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object's members as a dict, refusing a key given twice (``json`` keeps the last)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ArchError(f"duplicate key '{key}' in a JSON object; keep one")
        out[key] = value
    return out


def load_arch(path: str | Path, space: Any = None) -> Arch:
    """Read and validate an ``arch.json`` file.

    Args:
        path: The file.
        space: Optional :class:`~attnas.spaces.base.Space`; when given, the architecture's
            meaning is validated too (operations, sources, constraints).

    Raises:
        ArchError: Naming the problem and the file.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ArchError(f"cannot read {path}: {exc.strerror}") from None
    text = decode_text(raw, str(path), ArchError)
    arch = Arch.from_json(text, source=str(path))
    if space is not None:
        try:
            space.validate(arch)
        except ArchError as exc:
            raise ArchError(f"{path}: {exc}") from None
    return arch
