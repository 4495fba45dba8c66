"""Optional compiled CPU kernels that replace eager operations of :mod:`attnas.ops`.

Model code never imports this package: each kernel registers overrides for hooks that model
code marks with :func:`attnas.ops.overrides.overridable` (an override returns
``NotImplemented`` where it does not apply, and the eager PyTorch operation runs). Importing
the package registers every kernel; :mod:`attnas.runs.build` imports it once, unless
``ATTNAS_NO_KERNELS=1``. Deleting the package leaves every recipe running on the eager paths.

Switches:

* ``ATTNAS_NO_KERNELS=1``: no kernel at all (the package is not imported, or registers nothing);
* ``ATTNAS_DISABLE_KERNELS=name,name``: those kernels off;
* :func:`disable` / :func:`enable` at run time, :func:`switched_off` for a block.

The C++ sources are ``csrc/*.cpp`` and ``csrc/*.h``; :mod:`attnas.kernels._build` builds and
loads them (a per-user cache whose files are checked before loading).

Kernels (:data:`KERNELS`): ``attention_gates`` (AutoLA's gated attention modules, Eqs. 4-8),
``fused_phi`` (the HOGA cell's projection, Eq. 3), ``grouped_mixed_op`` (the relaxed HOGA cell's
mixed operations of all edges together: PyTorch), ``hoga_gates`` (its full-size
passes, compiled), ``small_conv`` (stride-1 convolutions with few channels per group), ``local_attention_flat`` (SASA local self-attention
without unfolded copies: PyTorch, any device), ``local_attention`` (the same compiled for the
CPU), ``dropout`` (the hashed dropout mask), ``window_max`` (AutoAttend's ``max pool 3`` with a
fused backward: PyTorch), ``sparse_transpose`` (its graph operations' sparse products with
cached transposes: PyTorch).

``torch.library``: the dropout mask is the custom operator ``attnas::dropout_mask``, which
``torch.compile`` sees as one opaque operation (eager calls its implementation directly:
the dispatcher's cost halved the kernel's gain). The others are not registered:
``small_conv`` as an operator pair with ``register_autograd`` made the AutoLA DARTS step
6.5 % slower (docs/results/kernels.md); ``local_attention``, ``attention_gates``,
``hoga_gates`` and ``fused_phi`` are autograd functions that keep ctypes libraries, module
objects or byte offsets into shared buffers in their context, which an operator cannot
take; ``local_attention_flat`` is plain PyTorch, which ``torch.compile`` traces as it is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from attnas.kernels._build import disabled_by_environment
from attnas.ops import overrides

#: Every kernel, in the order they are registered.
KERNELS = ("grouped_mixed_op", "small_conv", "hoga_gates", "attention_gates", "fused_phi", "local_attention_flat",
           "local_attention", "dropout", "window_max", "sparse_transpose")

_disabled: set[str] = set()


def _check(names: tuple[str, ...]) -> None:
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        raise ValueError(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(KERNELS)}")


def disable(*names: str) -> None:
    """Switch kernels off (all of them when no name is given); their eager operations run."""
    _check(names)
    _disabled.update(names or KERNELS)
    overrides.set_disabled(_disabled)


def enable(*names: str) -> None:
    """Switch kernels back on (all of them when no name is given)."""
    _check(names)
    if names:
        _disabled.difference_update(names)
    else:
        _disabled.clear()
    overrides.set_disabled(_disabled)


@contextlib.contextmanager
def switched_off(*names: str) -> Iterator[None]:
    """Within the block kernels ``names`` are off (the others as they were); restored after."""
    _check(names)
    saved = set(_disabled)
    disable(*names) if names else None
    try:
        yield
    finally:
        _disabled.clear()
        _disabled.update(saved)
        overrides.set_disabled(_disabled)


def enabled(name: str) -> bool:
    """Whether kernel ``name`` is on (it may still not apply to a call, or fail to build)."""
    return name not in _disabled and not disabled_by_environment()


def _register_all() -> None:
    from attnas.kernels import (attention_gates, dropout, fused_phi, grouped_mixed_op,  # noqa: F401
                                hoga_gates, local_attention, local_attention_flat, small_conv,
                                sparse_transpose, window_max)


_register_all()
if disabled_by_environment():
    disable()
else:
    _env = [n.strip() for n in os.environ.get("ATTNAS_DISABLE_KERNELS", "").split(",") if n.strip()]
    if _env:
        disable(*_env)
