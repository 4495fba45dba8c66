"""The one build-and-load path of the compiled kernels.

A kernel is a C++ source in ``attnas/kernels/csrc`` (plain C++, no PyTorch headers), built with
``g++ -O3 -march=native -fopenmp -shared`` into a per-user cache and called through
:mod:`ctypes` on tensor data pointers. The first build takes a few seconds, announced by one
line on the ``attnas.kernels._build`` logger (``building kernel NAME (once, about N s)``, at INFO,
which the command line shows); later processes load the cached shared object, after these checks:

* the cache key is the SHA-256 of the source and every header of ``csrc``, the compiler's path
  and ``--version`` output, the flags and the CPU's model and feature flags (``-march=native``
  code must not run on another CPU);
* the cache folder (``$ATTNAS_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/attnas/kernels``) must
  belong to the user and must not be writable by group or others: a folder others can write to
  is refused (the kernel is then unavailable, with a message saying why);
* the SHA-256 of every shared object is recorded next to it (``<name>.so.sha256``) when it is
  built and checked before it is loaded: a file that does not match its record (corrupt,
  truncated, replaced), has no record, or does not load, is rebuilt with a warning.

When there is no compiler or the build fails, :meth:`Library.load` returns ``None``,
:attr:`Library.error` says why, and the caller computes the eager PyTorch path.
``ATTNAS_NO_KERNELS=1`` refuses every kernel.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

#: The ``dtype`` argument of every kernel: 0 for float32, 1 for float64.
KERNEL_DTYPES: dict[torch.dtype, int] = {torch.float32: 0, torch.float64: 1}

#: The C++ sources and headers (package data).
CSRC = Path(__file__).resolve().parent / "csrc"

_log = logging.getLogger(__name__)

FLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-shared", "-fPIC", "-std=c++17"]


def disabled_by_environment() -> bool:
    """Whether ``ATTNAS_NO_KERNELS`` is set (to anything but ``""`` or ``"0"``)."""
    return os.environ.get("ATTNAS_NO_KERNELS", "") not in ("", "0")


def cpu_signature() -> str:
    """The CPU model and feature flags."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            lines = [line for line in f if line.startswith(("model name", "flags"))][:2]
        return "".join(lines)
    except OSError:
        return platform.processor() or platform.machine()


def cache_dir() -> Path:
    """Where compiled kernels are kept: ``$ATTNAS_KERNEL_CACHE``, else
    ``$XDG_CACHE_HOME/attnas/kernels`` (``~/.cache/attnas/kernels``)."""
    explicit = os.environ.get("ATTNAS_KERNEL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attnas" / "kernels"


def compiler() -> str | None:
    """The C++ compiler (``$CXX``, default ``g++``) on ``PATH``, or ``None``."""
    return shutil.which(os.environ.get("CXX", "g++"))


_VERSIONS: dict[str, str] = {}


def compiler_version(cxx: str) -> str:
    """``cxx --version`` (cached per process); part of the cache key."""
    if cxx not in _VERSIONS:
        try:
            result = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
            _VERSIONS[cxx] = result.stdout.strip() or result.stderr.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            _VERSIONS[cxx] = f"unknown ({type(exc).__name__})"
    return _VERSIONS[cxx]


def source_digest(source: str) -> str:
    """SHA-256 of ``csrc/<source>`` and of every header in ``csrc`` (a header edit rebuilds)."""
    h = hashlib.sha256()
    for path in [CSRC / source, *sorted(CSRC.glob("*.h"))]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class UntrustedCache(RuntimeError):
    """The cache folder is not safe to load compiled code from."""


def trusted_folder(folder: Path) -> Path:
    """``folder``, created (mode 0700) when missing; raises :class:`UntrustedCache` when it does
    not belong to the user or when group or others can write to it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = folder.stat()
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UntrustedCache(f"kernel cache {folder} belongs to another user (uid {st.st_uid}); refusing to load "
                             f"compiled code from it (set ATTNAS_KERNEL_CACHE to a private folder)")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedCache(f"kernel cache {folder} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); "
                             f"refusing to load compiled code from it (chmod go-w it, or set ATTNAS_KERNEL_CACHE)")
    return folder


class Library:
    """One kernel library: ``csrc/<name>.cpp``, built once (and cached across processes), then bound.

    Args:
        name: The source's stem, and the library's name in the cache.
        signatures: Function name -> its argument types (``ctypes`` types, in order); every
            function returns an ``int`` (0 on success, else an error code).

    Attributes:
        library: The bound :class:`ctypes.CDLL` once loaded, else ``None``.
        error: Why loading failed, else ``None``.
        build_seconds: Seconds the last :meth:`load` spent compiling (0.0: the cached library
            was used; ``None``: not loaded yet).
    """

    def __init__(self, name: str, signatures: Mapping[str, Sequence[Any]]):
        self.name, self.signatures = name, dict(signatures)
        self.library: Any = None
        self.error: str | None = None
        self.build_seconds: float | None = None
        self._lock = threading.Lock()

    def load(self) -> Any:
        """The bound library, building it on first use; ``None`` when it cannot be built (a
        one-line warning says why, once per process, unless ``ATTNAS_NO_KERNELS`` is set).

        Once loaded it is returned without taking the lock (the kernels ask on every call)."""
        if self.library is not None:
            return self.library
        if disabled_by_environment():  # not remembered: the variable may change (tests)
            self.error = "disabled by ATTNAS_NO_KERNELS"
            return None
        with self._lock:
            if self.library is not None or (self.error is not None and self.error != "disabled by ATTNAS_NO_KERNELS"):
                return self.library
            try:
                self.library = self._load()
            except Exception as exc:  # no compiler, untrusted cache, compiler error, missing libgomp...
                self.error = str(exc) if isinstance(exc, (UntrustedCache, _NoCompiler)) else f"{type(exc).__name__}: {exc}"
                warnings.warn(f"attnas.kernels: {self.name} kernel unavailable, using the eager PyTorch path: "
                              f"{self.error}", RuntimeWarning, stacklevel=3)
            return self.library

    def _load(self) -> ctypes.CDLL:
        cxx = compiler()
        if cxx is None:
            raise _NoCompiler(f"no C++ compiler ({os.environ.get('CXX', 'g++')} not found on PATH)")
        key = hashlib.sha256("\0".join([source_digest(f"{self.name}.cpp"), cxx, compiler_version(cxx), *FLAGS,
                                        cpu_signature()]).encode()).hexdigest()[:16]
        folder = trusted_folder(cache_dir())
        path = folder / f"{self.name}_{key}.so"
        record = path.with_name(path.name + ".sha256")
        self.build_seconds = 0.0
        if path.exists():
            problem = self._check(path, record)
            if problem is None:
                try:
                    _log.debug("loading kernel %s from the cache: %s", self.name, path)
                    return self._bind(ctypes.CDLL(str(path)))
                except OSError as exc:
                    problem = f"it does not load ({exc})"
            warnings.warn(f"attnas.kernels: rebuilding {path.name}: {problem}", RuntimeWarning, stacklevel=4)
        _log.info("building kernel %s (once, about %.0f s)", self.name, estimated_build_seconds(self.name, folder))
        t0 = time.perf_counter()
        self._build(cxx, folder, path, record)
        self.build_seconds = time.perf_counter() - t0
        _record_build_seconds(self.name, folder, self.build_seconds)
        _log.debug("built kernel %s in %.1f s: %s", self.name, self.build_seconds, path)
        return self._bind(ctypes.CDLL(str(path)))

    @staticmethod
    def _check(path: Path, record: Path) -> str | None:
        """Why the cached ``path`` must not be loaded (``None``: its SHA-256 matches its record)."""
        try:
            want = record.read_text(encoding="utf-8").strip()
        except OSError:
            return "no SHA-256 record"
        return None if file_sha256(path) == want else "its SHA-256 does not match the record (corrupt or replaced)"

    def _build(self, cxx: str, folder: Path, path: Path, record: Path) -> None:
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            built = Path(tmp) / f"{self.name}.so"
            result = subprocess.run([cxx, *FLAGS, "-I", str(CSRC), str(CSRC / f"{self.name}.cpp"), "-o", str(built)],
                                    capture_output=True, text=True, timeout=300)
            if result.returncode != 0:
                raise RuntimeError(f"{cxx} failed: {result.stderr.strip()[-500:]}")
            digest = Path(tmp) / "sha256"
            digest.write_text(file_sha256(built) + "\n", encoding="utf-8")
            # record first, then the library: a reader that sees the new library sees its record;
            # both renames are atomic, so concurrent builders never see half a file
            os.replace(digest, record)
            os.replace(built, path)

    def _bind(self, lib: ctypes.CDLL) -> ctypes.CDLL:
        for name, args in self.signatures.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = list(args), ctypes.c_int
        return lib

    def unavailable_reason(self) -> str | None:
        """Why :meth:`load` returned ``None`` (``None`` if it has not failed)."""
        return self.error

    def call(self, function: str, *args: Any) -> None:
        """Call ``function`` of the loaded library; tensors are passed as their data pointers
        (``None`` as a null pointer, C arrays as their address); a non-zero return code raises."""
        pointers = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        rc = getattr(self.load(), function)(*pointers)
        if rc != 0:
            raise RuntimeError(f"compiled kernel {self.name}.{function} failed with code {rc}")


class _NoCompiler(RuntimeError):
    pass


def _seconds_file(name: str, folder: Path) -> Path:
    return folder / f"{name}.build-seconds"


def estimated_build_seconds(name: str, folder: Path) -> float:
    """About how long building kernel ``name`` takes: its last build's time on this machine
    (recorded in the cache folder), else a guess from the length of its source
    and of the headers it includes (about 5 ms a line with ``-O3`` on one core, at least 1 s)."""
    try:
        return max(1.0, float(_seconds_file(name, folder).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        pass
    return max(1.0, 0.005 * sum(len(text.splitlines()) for text in _source_texts(CSRC / f"{name}.cpp")))


def _source_texts(path: Path, seen: set[Path] | None = None) -> list[str]:
    """The text of ``path`` and of the ``csrc`` headers it includes (``#include "x.h"``), each once."""
    seen = set() if seen is None else seen
    if path in seen or not path.exists():
        return []
    seen.add(path)
    text = path.read_text(encoding="utf-8")
    headers = re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, flags=re.M)
    return [text, *[t for h in headers for t in _source_texts(CSRC / h, seen)]]


def _record_build_seconds(name: str, folder: Path, seconds: float) -> None:
    """Keep how long the build took, for the next build's notice (a failure is ignored: it is
    only an estimate)."""
    try:
        _seconds_file(name, folder).write_text(f"{seconds:.1f}\n", encoding="utf-8")
    except OSError:
        pass


def int64_array(values: Sequence[int]) -> ctypes.Array:
    """``values`` as a C ``int64_t`` array (a kernel argument; a sixth of the cost of a tensor)."""
    return (ctypes.c_int64 * len(values))(*values)


def pointer_table(tensors: Sequence[torch.Tensor | None]) -> ctypes.Array:
    """The data pointers of ``tensors`` as a C ``int64_t`` array (``None``: a null pointer)."""
    return int64_array([0 if t is None else t.data_ptr() for t in tensors])
