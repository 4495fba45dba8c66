"""``fixed``: no search, train a given architecture (hand-designed baselines, a user's design).

The architecture comes from the recipe (``strategy.arch``: the ``choices`` of an
:class:`~attnas.core.arch.Arch`) or from a file (``strategy.arch_file``: an ``arch.json``, e.g.
one found by another run). It is validated against the space before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attnas.config import CheckedConfig
from attnas.core.arch import Arch, load_arch
from attnas.core.errors import ConfigError
from attnas.registry import register_strategy
from attnas.strategies.base import SearchResult, Strategy


@dataclass(frozen=True)
class FixedConfig(CheckedConfig):
    """Options of ``fixed``.

    Attributes:
        arch: The architecture's ``choices``.
        arch_file: Path of an ``arch.json`` (used when ``arch`` is empty).
    """

    arch: dict[str, Any] | None = None
    arch_file: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.arch and not self.arch_file:
            raise ConfigError("strategy: 'fixed' needs strategy.arch (the choices) or strategy.arch_file")


@register_strategy("fixed")
class FixedArchitecture(Strategy):
    """Train one given architecture (no search)."""

    name = "fixed"
    Config = FixedConfig

    @classmethod
    def check(cls, options: FixedConfig, space: Any) -> None:
        cls._arch(options, space)

    @staticmethod
    def _arch(options: FixedConfig, space: Any) -> Arch:
        if options.arch:
            arch = Arch(space.name, dict(options.arch), meta={"strategy": "fixed"})
            space.validate(arch)
            return arch
        return load_arch(options.arch_file, space)

    def search(self) -> SearchResult:
        arch = self._arch(self.options, self.space)
        self.run.log({"phase": "fixed", "arch": arch.choices})
        return SearchResult(arch, {})
