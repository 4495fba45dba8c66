"""Helpers for the tests of the compiled CPU kernels (``attnas/ops/_*_kernel.py``)."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import pytest

from attnas.ops._compiled import CompiledLibrary, compiler


def loaded_kernel(kernel_module: ModuleType) -> Any:
    """The module's compiled library; skips without a compiler or with ``ATTNAS_NO_KERNELS``,
    and a build failure is a test failure when a compiler exists."""
    if compiler() is None:
        pytest.skip("no C++ compiler: the kernel cannot be built (the fallback is tested too)")
    if os.environ.get("ATTNAS_NO_KERNELS", "") not in ("", "0"):
        pytest.skip("ATTNAS_NO_KERNELS is set: the kernel is disabled")
    lib = kernel_module.load()
    assert lib is not None, kernel_module.LIBRARY.unavailable_reason()
    return lib


def fresh_library(kernel_module: ModuleType) -> CompiledLibrary:
    """The module's library as a new process would find it (not loaded yet)."""
    return CompiledLibrary(kernel_module.LIBRARY.name, kernel_module._SOURCE, kernel_module._bind)
