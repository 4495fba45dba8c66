"""Optional extras: the one-line error that names the extra to install."""

from __future__ import annotations

import sys

import pytest

from attnas.core.errors import ConfigError
from attnas.runtime import extras


def test_missing_extra_names_only_packages_of_an_extra():
    assert extras.missing_extra(ModuleNotFoundError("x", name="torch_geometric.data")) == "torch_geometric"
    assert extras.missing_extra(ModuleNotFoundError("x", name="botorch")) == "botorch"
    assert extras.missing_extra(ModuleNotFoundError("x", name="no_such_package")) is None
    assert extras.missing_extra(ImportError("cannot import name")) is None


def test_require_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gpytorch", None)  # as where attnas[bo] is not installed
    with pytest.raises(ConfigError) as err:
        extras.require(("gpytorch", "botorch"), "strategy 'latent-bo'")
    assert str(err.value) == ('strategy \'latent-bo\' needs gpytorch, which is not installed: '
                              'pip install "attnas[bo]"')
    extras.require(("torch",), "anything")  # installed: no error


def test_a_strategy_that_needs_a_missing_extra_is_refused_before_the_run(monkeypatch):
    from attnas.runs.build import build_space, check_strategy
    from attnas.config import load_config

    config = load_config("latent-bo-cora-quick")
    space = build_space(config)
    check_strategy(config, space)
    monkeypatch.setitem(sys.modules, "botorch", None)
    with pytest.raises(ConfigError, match=r'strategy \'latent-bo\' needs botorch.*pip install "attnas\[bo\]"'):
        check_strategy(config, space)
