"""attnas.runtime.allocator: with glibc's thresholds fixed, memory freed in one step is reused in the next."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnas.runtime.allocator import _glibc, keep_freed_memory

#: A training step's allocation pattern in C ``malloc`` calls, run twice in a fresh process: a
#: large block freed, then forty 1 MiB blocks touched and freed together. Prints whether the
#: settings were applied and the page faults of the second step.
SCRIPT = r"""
import ctypes, ctypes.util, resource, sys
from attnas.runtime.allocator import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
MiB = 1 << 20
def step():
    big = libc.malloc(8 * MiB)
    libc.memset(big, 1, 8 * MiB)
    libc.free(big)
    blocks = [libc.malloc(MiB) for _ in range(40)]
    for b in blocks:
        libc.memset(b, 1, MiB)
    for b in reversed(blocks):
        libc.free(b)
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
step()
print(int(applied), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

GLIBC_VARIABLES = ("ATTNAS_MALLOC", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def _second_step_faults(mode: str) -> tuple[bool, int]:
    env = {k: v for k, v in os.environ.items() if k not in GLIBC_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env, timeout=120,
                         check=True).stdout.split()
    return out[0] == "1", int(out[1])


@pytest.mark.skipif(_glibc() is None or not sys.platform.startswith("linux"), reason="glibc only")
def test_freed_memory_is_reused_without_page_faults():
    applied, kept = _second_step_faults("keep")
    assert applied
    _, default = _second_step_faults("default")
    # glibc's own thresholds: the 40 MiB freed at the top of the heap is given back to the system
    # and the next step touches fresh pages (8,160 faults on the development machine).
    assert default > 5000
    assert kept < 100


def test_opt_out_and_user_settings_are_kept(monkeypatch):
    for name in GLIBC_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ATTNAS_MALLOC", "default")
    assert keep_freed_memory() is False
    monkeypatch.delenv("ATTNAS_MALLOC")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert keep_freed_memory() is False
