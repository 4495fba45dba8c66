"""Helpers for the tests of the compiled CPU kernels (``attnas/kernels``)."""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import torch

import attnas.kernels
from attnas.kernels._build import Library, compiler


def loaded_kernel(kernel_module: ModuleType) -> Any:
    """The module's compiled library; skips without a compiler or with ``ATTNAS_NO_KERNELS``,
    and a build failure is a test failure when a compiler exists."""
    if compiler() is None:
        pytest.skip("no C++ compiler: the kernel cannot be built (the fallback is tested too)")
    if os.environ.get("ATTNAS_NO_KERNELS", "") not in ("", "0"):
        pytest.skip("ATTNAS_NO_KERNELS is set: the kernel is disabled")
    lib = kernel_module.LIBRARY.load()
    assert lib is not None, kernel_module.LIBRARY.unavailable_reason()
    return lib


def kernel_enabled(name: str) -> None:
    """Skip unless kernel ``name`` is on (``ATTNAS_NO_KERNELS`` / ``ATTNAS_DISABLE_KERNELS`` turn it off)."""
    if not attnas.kernels.enabled(name):
        pytest.skip(f"kernel {name} is off in this environment")


def fresh_library(kernel_module: ModuleType) -> Library:
    """The module's library as a new process would find it (not loaded yet)."""
    return Library(kernel_module.LIBRARY.name, kernel_module.LIBRARY.signatures)


def disable_kernel(monkeypatch: pytest.MonkeyPatch, kernel_module: ModuleType, how: str) -> None:
    """Make the module's kernel unavailable, as a new process would find it: ``how`` is
    ``"no compiler"`` (``CXX`` names no program) or ``"ATTNAS_NO_KERNELS"``."""
    monkeypatch.setattr(kernel_module, "LIBRARY", fresh_library(kernel_module))
    if how == "no compiler":
        monkeypatch.setenv("CXX", "attnas-no-such-compiler")
        monkeypatch.delenv("ATTNAS_NO_KERNELS", raising=False)
    else:
        monkeypatch.setenv("ATTNAS_NO_KERNELS", "1")


@contextlib.contextmanager
def kernels_off() -> Iterator[None]:
    """Every kernel off for the block (the eager PyTorch paths run), on again after."""
    attnas.kernels.disable()
    try:
        yield
    finally:
        attnas.kernels.enable()


def eager_twin(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` (same weights, loadable state dict) whose forward runs with every
    kernel off: the readable PyTorch path to compare a kernel with."""
    twin = copy.deepcopy(module)
    forward = twin.forward

    def run(*args: Any, **kwargs: Any) -> Any:
        with kernels_off():
            return forward(*args, **kwargs)

    twin.forward = run
    return twin


def eager(module: Any, *args: Any) -> Any:
    """``module(*args)`` (a module or any callable) with every kernel off."""
    with kernels_off():
        return module(*args)


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """``torch.set_num_threads(n)`` for the block, restored after."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def kernel_off(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Kernel ``name``'s overrides off until ``monkeypatch`` is undone."""
    from attnas.ops import overrides

    monkeypatch.setattr(overrides, "_ACTIVE", {hook: fn for hook, fn in overrides._ACTIVE.items()
                                               if overrides._REGISTERED[hook][0] != name})
