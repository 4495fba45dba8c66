"""The registry: discovery and helpful lookups."""

from __future__ import annotations

import pytest

from attnas import _registry
from attnas.errors import ConfigError


def test_core_components_are_discovered():
    assert "autoattend" in _registry.names("space")
    assert {"one-shot-evolution", "one-shot-random", "fixed"} <= set(_registry.names("strategy"))
    assert {"cora", "citeseer", "pubmed", "ppi", "digits-graph", "graph-file"} <= set(_registry.names("dataset"))
    assert "node-classification" in _registry.names("task")
    pyg = set(_registry.names("op", "pyg"))
    assert pyg == {"zero", "identity", "gcn", "sage", "gat_1", "gat_2", "gat_4", "gat_8", "gat_16", "linear",
                   "arma", "cheb", "sg"}
    # Sec. 5.2.1: every CiteSeer / PubMed operation has the Eq. 7 form, zero aside (no identity)
    assert set(_registry.names("op", "mp")) == {"zero", "const", "gcn", "gat", "sym_gat", "cos", "linear",
                                                "gene_linear"}


def test_unknown_name_suggests_and_lists():
    with pytest.raises(ConfigError) as err:
        _registry.get("op", "sagee", group="pyg")
    msg = str(err.value)
    assert "did you mean 'sage'" in msg and "gat_16" in msg


def test_duplicate_registration_is_refused():
    def a():
        pass

    def b():
        pass

    _registry.register("op", "dup-test", group="tests")(a)
    with pytest.raises(ValueError, match="registered twice"):
        _registry.register("op", "dup-test", group="tests")(b)
