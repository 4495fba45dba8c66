"""The version of the installed ``attnas`` distribution, read from its metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

#: Used where the package runs without being installed (a bare source checkout).
UNKNOWN = "0+unknown"


def read_version() -> str:
    """The ``attnas`` distribution's version, or :data:`UNKNOWN` when it is not installed."""
    try:
        return version("attnas")
    except PackageNotFoundError:
        return UNKNOWN


__version__ = read_version()
