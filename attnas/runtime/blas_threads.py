"""The BLAS thread limit of ``attnas --threads N`` for libraries loaded after the command starts.

``--threads N`` limits torch and the BLAS already loaded (numpy's) when the command starts. scipy
ships its own OpenBLAS, loaded only when scikit-learn's Gaussian processes are first imported
(``table-latent-bo``), and threadpoolctl can only limit a library that is loaded: that one kept its
default thread count, a second thread spinning on a busy 2-core machine. Code that fits with it wraps
the work in :func:`blas_limited`, which applies the command's limit to every BLAS loaded by then.
"""
from __future__ import annotations

import contextlib
from typing import ContextManager

_limit: int | None = None


def set_blas_limit(threads: int | None) -> None:
    """Record the command's thread limit (``attnas --threads``); None: no limit."""
    global _limit
    _limit = threads


def blas_limited() -> ContextManager[object]:
    """A context in which every loaded BLAS runs at most the command's ``--threads`` threads.

    Returns:
        ``threadpoolctl.threadpool_limits`` for the recorded limit, or a no-op context when no limit
        was set or threadpoolctl is not installed.
    """
    if _limit is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=_limit, user_api="blas")
