"""The package's public API: lazy exports, the version, a light import."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

from attnas import registry, _version, pipeline
import attnas
from attnas.training import retraining
def test_public_names_are_the_pipeline_and_registry_functions():
    assert attnas.search is pipeline.search and attnas.resume is pipeline.resume
    assert attnas.load_model is pipeline.load_model and attnas.evaluate is pipeline.evaluate
    assert attnas.retrain is retraining.retrain
    assert attnas.names is registry.names and attnas.create is registry.create
    assert "autoattend" in attnas.names("space")
    assert set(attnas.__all__) <= set(dir(attnas))
    for name in attnas.__all__:
        assert getattr(attnas, name) is not None


def test_unknown_names_and_submodules():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        attnas.nope  # noqa: B018
    from attnas.scale import sweep  # a submodule, not an export

    assert sweep.__name__ == "attnas.scale.sweep"


def test_version_comes_from_the_package_metadata(monkeypatch):
    assert attnas.__version__ == importlib.metadata.version("attnas")

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_version, "version", missing)
    assert _version.read_version() == "0+unknown"


def test_import_is_light():
    code = ("import sys\n"
            "import attnas\n"
            "heavy = [m for m in ('torch', 'torch_geometric', 'typer', 'importlib.metadata') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), cwd=Path(__file__).parents[1],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
