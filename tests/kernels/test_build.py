"""The kernel cache is trusted only after its checks (attnas.kernels._build)."""

from __future__ import annotations

import os

import pytest

import attnas.kernels.dropout as dropout_kernel
from attnas.kernels._build import Library, compiler


@pytest.fixture
def cache(tmp_path, monkeypatch):
    if compiler() is None:
        pytest.skip("no C++ compiler")
    monkeypatch.delenv("ATTNAS_NO_KERNELS", raising=False)
    folder = tmp_path / "kernels"
    monkeypatch.setenv("ATTNAS_KERNEL_CACHE", str(folder))
    return folder


def _fresh() -> Library:
    return Library(dropout_kernel.LIBRARY.name, dropout_kernel.LIBRARY.signatures)


def test_build_records_the_sha256_and_a_second_load_uses_the_cache(cache):
    lib = _fresh()
    assert lib.load() is not None and lib.build_seconds > 0
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    [so] = cache.glob("*.so")
    assert (cache / (so.name + ".sha256")).read_text().strip()
    again = _fresh()
    assert again.load() is not None and again.build_seconds == 0.0


def test_a_corrupt_library_is_rebuilt_with_a_warning(cache):
    assert _fresh().load() is not None
    [so] = cache.glob("*.so")
    bad = so.with_suffix(".tmp")
    bad.write_bytes(b"not an ELF file")
    os.replace(bad, so)  # a new file: the library this process mapped stays intact
    lib = _fresh()
    with pytest.warns(RuntimeWarning, match="rebuilding .*SHA-256 does not match"):
        assert lib.load() is not None
    assert lib.build_seconds > 0


def test_a_library_without_a_record_is_rebuilt(cache):
    assert _fresh().load() is not None
    [so] = cache.glob("*.so")
    os.remove(str(so) + ".sha256")
    with pytest.warns(RuntimeWarning, match="no SHA-256 record"):
        assert _fresh().load() is not None


def test_a_cache_others_can_write_to_is_refused(cache):
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)
    lib = _fresh()
    with pytest.warns(RuntimeWarning, match="writable by group or others"):
        assert lib.load() is None
    assert "refusing" in lib.unavailable_reason()
    assert not list(cache.glob("*.so"))


def test_a_first_build_is_announced_before_the_compiler_runs(tmp_path, monkeypatch, caplog):
    # a fake compiler: nothing is compiled; the announcement must come before the build call
    from attnas.kernels import _build

    monkeypatch.delenv("ATTNAS_NO_KERNELS", raising=False)
    monkeypatch.setenv("ATTNAS_KERNEL_CACHE", str(tmp_path / "kernels"))
    monkeypatch.setattr(_build, "compiler", lambda: "true")
    seen_at_build: list[str] = []

    def fake_build(self, cxx, folder, path, record):
        seen_at_build.extend(r.getMessage() for r in caplog.records)
        raise RuntimeError("fake compiler failed")

    monkeypatch.setattr(Library, "_build", fake_build)
    caplog.set_level("INFO", logger="attnas")
    lib = _fresh()
    with pytest.warns(RuntimeWarning, match="fake compiler failed"):
        assert lib.load() is None
    [notice] = seen_at_build
    assert notice.startswith(f"building kernel {lib.name} (once, about ") and notice.endswith(" s)")


def test_the_estimate_is_the_last_build_time_else_a_guess_from_the_source(tmp_path):
    from attnas.kernels._build import _record_build_seconds, estimated_build_seconds

    guess = estimated_build_seconds("hoga_gates", tmp_path)
    assert 1.0 <= guess < 60.0
    _record_build_seconds("hoga_gates", tmp_path, 23.4)
    assert estimated_build_seconds("hoga_gates", tmp_path) == 23.4
