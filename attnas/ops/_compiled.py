"""Optional CPU kernels in plain C++, compiled with the system compiler on first use.

A kernel is a C++ source without PyTorch headers, built with ``g++ -O3 -march=native
-fopenmp -shared`` into a per-user cache (``$XDG_CACHE_HOME/attnas/kernels``, keyed by
the source, the compiler, the flags and the CPU) and called through :mod:`ctypes` on
tensor data pointers. The first build takes a few seconds (no ninja, no
``torch.utils.cpp_extension``); later processes load the cached library. When there is no
compiler or the build fails, :meth:`CompiledLibrary.load` returns ``None`` and
:meth:`CompiledLibrary.unavailable_reason` says why, so that the caller falls back to its
eager PyTorch path. ``ATTNAS_NO_KERNELS=1`` refuses every kernel.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

#: The ``dtype`` argument of every kernel: 0 for float32, 1 for float64.
KERNEL_DTYPES: dict[torch.dtype, int] = {torch.float32: 0, torch.float64: 1}

FLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-shared", "-fPIC", "-std=c++17"]


def cpu_signature() -> str:
    """The CPU model and feature flags (``-march=native`` code must not run on another CPU)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            lines = [line for line in f if line.startswith(("model name", "flags"))][:2]
        return "".join(lines)
    except OSError:
        return platform.processor() or platform.machine()


def cache_dir() -> Path:
    """Where compiled kernels are kept (``$XDG_CACHE_HOME/attnas/kernels``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attnas" / "kernels"


def compiler() -> str | None:
    """The C++ compiler (``$CXX``, default ``g++``) on ``PATH``, or ``None``."""
    return shutil.which(os.environ.get("CXX", "g++"))


def int64_array(values: Sequence[int]) -> ctypes.Array:
    """``values`` as a C ``int64_t`` array (a kernel argument; a sixth of the cost of a tensor)."""
    return (ctypes.c_int64 * len(values))(*values)


def pointer_table(tensors: Sequence[torch.Tensor | None]) -> ctypes.Array:
    """The data pointers of ``tensors`` as a C ``int64_t`` array (``None``: a null pointer), for a
    kernel that takes a variable number of tensors."""
    return int64_array([0 if t is None else t.data_ptr() for t in tensors])


def bind_signatures(signatures: Mapping[str, Sequence[Any]]) -> Callable[[ctypes.CDLL], ctypes.CDLL]:
    """A ``bind`` for :class:`CompiledLibrary`: sets the argument types of each named function
    (``ctypes`` types, in order) and its ``int`` result (0 on success, else an error code)."""

    def bind(lib: ctypes.CDLL) -> ctypes.CDLL:
        for name, args in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = list(args), ctypes.c_int
        return lib

    return bind


class CompiledLibrary:
    """One kernel library: built once per process (and cached across processes), then bound.

    Args:
        name: File-name stem of the library in the cache.
        source: The C++ source.
        bind: Declares the argument and result types of the library's functions
            (called with the loaded :class:`ctypes.CDLL`) and returns what :meth:`load` gives.

    Attributes:
        library: The bound library once loaded, else ``None``.
        error: Why loading failed, else ``None``.
        build_seconds: Seconds the last :meth:`load` spent compiling (0.0: the cached
            library was used; ``None``: not loaded yet).
    """

    def __init__(self, name: str, source: str, bind: Callable[[ctypes.CDLL], Any]):
        self.name, self.source, self.bind = name, source, bind
        self.library: Any = None
        self.error: str | None = None
        self.build_seconds: float | None = None
        self._lock = threading.Lock()

    def load(self) -> Any:
        """The bound library, building it on first use; ``None`` when it cannot be built.

        Once loaded it is returned without taking the lock: the kernels' checks and calls ask
        for it on every call."""
        if self.library is not None:
            return self.library
        with self._lock:
            if self.library is not None or self.error is not None:
                return self.library
            if os.environ.get("ATTNAS_NO_KERNELS", "") not in ("", "0"):
                self.error = "disabled by ATTNAS_NO_KERNELS"
                return None
            cxx = compiler()
            if cxx is None:
                self.error = f"no C++ compiler ({os.environ.get('CXX', 'g++')} not found on PATH)"
                return None
            key = hashlib.sha256("\0".join([self.source, cxx, *FLAGS, cpu_signature()]).encode()).hexdigest()[:16]
            folder = cache_dir()
            path = folder / f"{self.name}_{key}.so"
            try:
                if not path.exists():
                    folder.mkdir(parents=True, exist_ok=True)
                    t0 = time.perf_counter()
                    with tempfile.TemporaryDirectory(dir=folder) as tmp:
                        src = Path(tmp) / f"{self.name}.cpp"
                        src.write_text(self.source, encoding="utf-8")
                        built = Path(tmp) / f"{self.name}.so"
                        result = subprocess.run([cxx, *FLAGS, str(src), "-o", str(built)],
                                                capture_output=True, text=True, timeout=300)
                        if result.returncode != 0:
                            raise RuntimeError(f"{cxx} failed: {result.stderr.strip()[-500:]}")
                        os.replace(built, path)  # atomic: concurrent builders never see half a file
                    self.build_seconds = time.perf_counter() - t0
                else:
                    self.build_seconds = 0.0
                self.library = self.bind(ctypes.CDLL(str(path)))
            except Exception as exc:  # no permission, compiler error, missing libgomp...
                self.error = f"{type(exc).__name__}: {exc}"
            return self.library

    def unavailable_reason(self) -> str | None:
        """Why :meth:`load` returned ``None`` (``None`` if it has not failed)."""
        return self.error

    def call(self, function: str, *args: Any) -> None:
        """Call ``function`` of the loaded library; tensors are passed as their data pointers
        (``None`` as a null pointer, C arrays as their address), and a non-zero return code
        raises ``RuntimeError``."""
        pointers = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        rc = getattr(self.load(), function)(*pointers)
        if rc != 0:
            raise RuntimeError(f"compiled kernel {self.name}.{function} failed with code {rc}")
