"""Hooks through which an optional package may replace an eager operation with a faster one.

Model code marks an operation that an accelerated implementation may replace::

    @overridable("attention_gate")
    def forward(self, x):
        return x * self.gate(x)

and otherwise knows nothing of what replaces it. An acceleration package (``attnas.kernels``)
registers, for a hook, an *override*: a function with the eager function's signature that
returns its result, or ``NotImplemented`` when it does not apply to this call (a dtype, device,
shape or mode it does not handle); the eager function then runs. Without a registered,
enabled override the eager function runs and the hook costs one dictionary look-up.

Each override belongs to a *kernel* (a name such as ``"fused_phi"``): the unit that is switched
on and off (:func:`set_disabled`, used by ``attnas.kernels.disable``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: hook -> (kernel, override), as registered.
_REGISTERED: dict[str, tuple[str, Callable[..., Any]]] = {}
#: hook -> override, for the kernels that are enabled (what the hooks read).
_ACTIVE: dict[str, Callable[..., Any]] = {}
_DISABLED: set[str] = set()


def register(hook: str, kernel: str, override: Callable[..., Any]) -> None:
    """Register ``override`` (of ``kernel``) for ``hook``; it replaces an earlier one."""
    _REGISTERED[hook] = (kernel, override)
    _refresh()


def set_disabled(kernels: Iterable[str]) -> None:
    """Switch off the overrides of ``kernels`` (and on those of every other kernel)."""
    _DISABLED.clear()
    _DISABLED.update(kernels)
    _refresh()


def _refresh() -> None:
    _ACTIVE.clear()
    _ACTIVE.update({hook: fn for hook, (kernel, fn) in _REGISTERED.items() if kernel not in _DISABLED})


@contextlib.contextmanager
def eager_only() -> Iterator[None]:
    """Within the block every hook runs its eager PyTorch function (e.g. while ``torch.export``
    traces a model: the compiled kernels are not operations an exported program can hold)."""
    saved = set(_DISABLED)
    set_disabled(kernel for kernel, _ in _REGISTERED.values())
    try:
        yield
    finally:
        set_disabled(saved)


def registered() -> dict[str, str]:
    """hook -> the kernel whose override is registered for it."""
    return {hook: kernel for hook, (kernel, _) in _REGISTERED.items()}


def active(hook: str) -> bool:
    """Whether an enabled override is registered for ``hook``."""
    return hook in _ACTIVE


def overridable(hook: str) -> Callable[[F], F]:
    """Decorator: the function (or method) may be replaced by the override registered for ``hook``."""

    def wrap(eager: F) -> F:
        @functools.wraps(eager)
        def dispatch(*args: Any, **kwargs: Any) -> Any:
            override = _ACTIVE.get(hook)
            if override is not None:
                out = override(*args, **kwargs)
                if out is not NotImplemented:
                    return out
            return eager(*args, **kwargs)

        dispatch.eager = eager  # type: ignore[attr-defined]  (the eager function itself)
        return dispatch  # type: ignore[return-value]

    return wrap
