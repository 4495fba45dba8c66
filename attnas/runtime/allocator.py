"""glibc ``malloc`` settings for a training process: keep freed memory instead of returning it.

PyTorch's CPU tensors come from the C library's ``malloc``. glibc adapts two thresholds as a
process runs: blocks above the *mmap threshold* get pages of their own, and free memory at the
top of the heap beyond the *trim threshold* (twice the mmap threshold) is given back to the
system. A training step frees its activations during the backward, and when that frees more
than the trim threshold at the top of the heap, the next step's forward touches fresh pages
again: one page fault per 4 KiB. On the development machine (glibc 2.36, 2 threads, batch
64, channels-last), a training step of ResNet-20 + the Figure-3 HOGA cell faulted 1 to about
4,000 times, depending on the run (the heap's layout); plain ResNet-20 did not fault; with
these settings neither did (1-3 faults per step). :func:`keep_freed_memory` fixes both thresholds (``M_MMAP_THRESHOLD`` 32 MiB,
glibc's largest, and ``M_TRIM_THRESHOLD`` 1 GiB): the heap keeps up to 1 GiB of freed memory
for the next step, and blocks over 32 MiB (datasets, large buffers) are still mapped and
returned on their own.

It is process-wide, so the library never calls it on import. The ``attnas`` command calls it
before the commands that train or run models (before any tensor exists) unless ``ATTNAS_MALLOC=default`` is set, or the user already
chose glibc settings (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``,
``GLIBC_TUNABLES``), or the C library is not glibc. Python-API users can call it themselves.
The cost: the process's resident memory stays at its peak (up to 1 GiB more than it uses).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: glibc's ``mallopt`` parameters (``<malloc.h>``).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

#: Freed memory the heap keeps (bytes).
TRIM_THRESHOLD = 1 << 30
#: Blocks above this size get pages of their own (glibc accepts at most 32 MiB on 64-bit).
MMAP_THRESHOLD = 32 << 20

#: Variables with which the user chose glibc's settings (then they are kept).
USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (it has ``gnu_get_libc_version``), else ``None``."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    return libc


def keep_freed_memory(trim_threshold: int = TRIM_THRESHOLD, mmap_threshold: int = MMAP_THRESHOLD) -> bool:
    """Set glibc's trim and mmap thresholds for this process (see the module docstring).

    Args:
        trim_threshold: Freed bytes the heap keeps before giving memory back to the system.
        mmap_threshold: Blocks above this many bytes are mapped (and unmapped when freed) on
            their own.

    Returns:
        Whether both settings were applied: ``False`` with ``ATTNAS_MALLOC=default``, when the
        user set glibc's own variables, off glibc, or when glibc refused a value.
    """
    if os.environ.get("ATTNAS_MALLOC", "").strip().lower() == "default":
        return False
    if any(os.environ.get(name) for name in USER_SETTINGS):
        return False
    libc = _glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    limit = (1 << 31) - 1  # mallopt takes an int
    ok = mallopt(M_MMAP_THRESHOLD, min(mmap_threshold, limit)) == 1
    return mallopt(M_TRIM_THRESHOLD, min(trim_threshold, limit)) == 1 and ok
