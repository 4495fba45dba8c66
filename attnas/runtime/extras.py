"""The optional extras of the install and the one-line error when one is missing.

The base install (``pip install attnas``) runs the image and text methods. Graph tasks,
spaces and operations need torch_geometric (``pip install "attnas[graph]"``); the latent
Bayesian optimisation of the graph VAEs needs gpytorch and BoTorch
(``pip install "attnas[bo]"``). Modules that need them import them at their top; the
registry imports a component's module only when the component is looked up
(``attnas.registry``), and turns the import failure into the message of :func:`missing_error`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from attnas.core.errors import ConfigError

#: Top-level optional package -> the attnas extra that installs it.
EXTRAS = {"torch_geometric": "graph", "gpytorch": "bo", "botorch": "bo", "linear_operator": "bo"}


def missing_extra(exc: ImportError) -> str | None:
    """The package ``exc`` failed to import when it is one an attnas extra installs, else ``None``."""
    top = (getattr(exc, "name", None) or "").split(".")[0]
    return top if top in EXTRAS else None


def missing_error(package: str, what: str) -> ConfigError:
    """``<what> needs <package>, which is not installed: pip install "attnas[<extra>]"``."""
    return ConfigError(f'{what} needs {package}, which is not installed: pip install "attnas[{EXTRAS[package]}]"')


def require(packages: Iterable[str], what: str) -> None:
    """Raise :func:`missing_error` for the first of ``packages`` that cannot be imported.

    Args:
        packages: Top-level package names (keys of :data:`EXTRAS`).
        what: The component that needs them, e.g. ``"strategy 'latent-bo'"``.
    """
    for package in packages:
        try:
            found = importlib.util.find_spec(package) is not None
        except (ImportError, ValueError):  # a package set to None in sys.modules, or a broken one
            found = False
        if not found:
            raise missing_error(package, what)
