"""The registry: discovery and helpful lookups."""

from __future__ import annotations

import pytest

from attnas import registry
from attnas.core.errors import ConfigError


def test_core_components_are_discovered():
    assert "autoattend" in registry.names("space")
    assert {"one-shot-evolution", "one-shot-random", "fixed"} <= set(registry.names("strategy"))
    assert {"cora", "citeseer", "pubmed", "ppi", "digits-graph", "graph-file"} <= set(registry.names("dataset"))
    assert "node-classification" in registry.names("task")
    pyg = set(registry.names("op", "pyg"))
    assert pyg == {"zero", "identity", "gcn", "sage", "gat_1", "gat_2", "gat_4", "gat_8", "gat_16", "linear",
                   "arma", "cheb", "sg"}
    # Sec. 5.2.1: every CiteSeer / PubMed operation has the Eq. 7 form, zero aside (no identity)
    assert set(registry.names("op", "mp")) == {"zero", "const", "gcn", "gat", "sym_gat", "cos", "linear",
                                                "gene_linear"}


def test_unknown_name_suggests_and_lists():
    with pytest.raises(ConfigError) as err:
        registry.get("op", "sagee", group="pyg")
    msg = str(err.value)
    assert "did you mean 'sage'" in msg and "gat_16" in msg


def test_duplicate_registration_is_refused():
    def a():
        pass

    def b():
        pass

    registry.register("op", "dup-test", group="tests")(a)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("op", "dup-test", group="tests")(b)


def test_two_classes_of_one_name_in_different_modules_are_refused_but_a_reimport_is_not():
    def make(module):
        def op():
            pass

        op.__module__ = module
        return op

    registry.register("op", "dup-module-test", group="tests")(make("plugin_a"))
    registry.register("op", "dup-module-test", group="tests")(make("plugin_a"))  # the same module imported again
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("op", "dup-module-test", group="tests")(make("plugin_b"))


def test_a_stale_index_entry_says_how_to_rebuild_the_index(monkeypatch):
    monkeypatch.setitem(registry._INDEX, ("space", "stale-space"), ("stale-space", "", "attnas.core.errors", {}))
    with pytest.raises(ConfigError, match=r"names attnas\.core\.errors, which does not register it; rebuild the index"):
        registry.get("space", "stale-space")


def test_the_index_matches_what_the_modules_register():
    from attnas._component_index import COMPONENTS

    assert registry.index_rows() == list(COMPONENTS), "the index is stale: run `python -m attnas.registry`"


def test_names_filter_by_group_and_metadata():
    assert registry.names("dataset", modality="image") == ["cifar10", "digits", "fashion-mnist", "image-folder"]
    assert {"sst2", "sst5", "csv"} <= set(registry.names("dataset", modality="text"))
    assert set(registry.names("dataset", "graph")) == {"cora", "citeseer", "pubmed", "ppi", "digits-graph",
                                                        "graph-file"}
    assert [e.name for e in registry.entries("dataset", modality="image")] == registry.names("dataset",
                                                                                             modality="image")


def test_is_registered_checks_group_and_metadata():
    assert registry.is_registered("op", "se", "hoga")
    assert not registry.is_registered("op", "se", "pyg")
    assert registry.is_registered("dataset", "sst5", modality="text")
    assert not registry.is_registered("dataset", "digits", modality="text")
    assert not registry.is_registered("space", "no-such-space")


#: A new Python looks a few names up and reports what it imported, with torch_geometric
#: made unimportable (as where attnas[graph] is not installed).
LAZY_LOOKUP = """
import json, sys
sys.modules["torch_geometric"] = None
from attnas import registry
from attnas.core.errors import ConfigError
out = {"image_names": registry.names("dataset", modality="image")}
out["after_names"] = sorted(m for m in sys.modules if m.startswith(("attnas.data.", "attnas.spaces.", "attnas.tasks.",
                                                                    "attnas.strategies.", "attnas.ops.")))
out["hoga"] = registry.get("space", "hoga").__module__
out["after_get"] = sorted(m for m in sys.modules if m.startswith("attnas.spaces."))
try:
    registry.get("dataset", "cora")
except ConfigError as exc:
    out["cora"] = str(exc)
try:
    registry.get("space", "hogaa")
except ConfigError as exc:
    out["unknown"] = str(exc)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def lazy_lookup() -> dict:
    import json
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.run([sys.executable, "-c", LAZY_LOOKUP], cwd=Path(__file__).parents[1], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_names_import_no_component(lazy_lookup):
    assert lazy_lookup["image_names"] == ["cifar10", "digits", "fashion-mnist", "image-folder"]
    assert lazy_lookup["after_names"] == []


def test_a_lookup_imports_only_the_module_of_the_name(lazy_lookup):
    assert lazy_lookup["hoga"] == "attnas.spaces.hoga"
    assert "attnas.spaces.hoga" in lazy_lookup["after_get"]
    others = {row[3] for row in _index_rows("space")} - {"attnas.spaces.hoga"}
    assert not others & set(lazy_lookup["after_get"])


def test_a_missing_extra_is_named_in_one_line(lazy_lookup):
    assert lazy_lookup["cora"] == ("dataset 'cora' needs torch_geometric, which is not installed: "
                                   'pip install "attnas[graph]"')


def test_an_unknown_name_lists_the_names_not_imported(lazy_lookup):
    assert "did you mean 'hoga'" in lazy_lookup["unknown"] and "autoattend" in lazy_lookup["unknown"]


def _index_rows(kind: str) -> list[tuple]:
    from attnas._component_index import COMPONENTS

    return [row for row in COMPONENTS if row[0] == kind]
