"""How many of this process's CPUs other work keeps busy right now, from ``/proc/stat``,
and the OpenMP wait policy that follows from it (:func:`choose_omp_wait_policy`).

The command line chooses the policy before the commands that train or run models. The
1-minute load average is a poor measure of how busy the CPUs are: it trails a finished run
by a minute, and on the development machine (a small VM) it read 1.2-1.4 while
``/proc/stat`` showed both CPUs idle (tasks waiting on I/O count in it). A run started then
would be treated as running on a busy machine, and its OpenMP threads would sleep between
kernels: ``autola-digits-quick`` took 74 s instead of 33 s that way.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

STAT = "/proc/stat"


def cpu_times(path: str = STAT) -> dict[int, tuple[int, int]]:
    """Per CPU (``cpuN`` lines of ``/proc/stat``): (all time, idle time) in clock ticks.

    Idle time is ``idle + iowait``; ``steal`` (time the hypervisor gave to others) counts as
    busy, with ``user``, ``nice``, ``system``, ``irq`` and ``softirq``.
    """
    times = {}
    with open(path, encoding="ascii") as f:
        for line in f:
            name, *fields = line.split()
            if not name.startswith("cpu") or name == "cpu":
                continue
            ticks = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
            times[int(name[3:])] = (sum(ticks), ticks[3] + ticks[4])
    return times


def busy_between(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]],
                 cpus: Iterable[int]) -> float:
    """CPUs' worth of busy time on ``cpus`` between two :func:`cpu_times` snapshots (0 to ``len(cpus)``)."""
    busy = 0.0
    for cpu in cpus:
        if cpu not in before or cpu not in after:
            continue
        total = after[cpu][0] - before[cpu][0]
        idle = after[cpu][1] - before[cpu][1]
        if total > 0:
            busy += min(max(1.0 - idle / total, 0.0), 1.0)
    return busy


def process_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity; all CPUs where that is unknown)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def busy_cpus(seconds: float = 0.25, path: str = STAT) -> float | None:
    """How many of the CPUs this process may run on were busy over the next ``seconds``
    (this process sleeps meanwhile); ``None`` where ``/proc/stat`` cannot be read."""
    cpus = process_cpus()
    try:
        before = cpu_times(path)
        time.sleep(seconds)
        after = cpu_times(path)
    except (OSError, ValueError, IndexError):
        return None
    if not any(cpu in before for cpu in cpus):
        return None
    return busy_between(before, after, cpus)


def choose_omp_wait_policy() -> str | None:
    """The OpenMP wait policy for this process, or ``None`` to keep the runtime's default.

    A policy the user set (``OMP_WAIT_POLICY``) is kept. Otherwise, when other work keeps the
    CPUs busy at start (at least the number of CPUs minus one half, measured over a quarter
    of a second by :func:`busy_cpus`; the 1-minute load average where ``/proc/stat`` is
    missing), idle OpenMP threads should sleep (``PASSIVE``): spinning threads that compete
    with other processes made small torch operations up to 70x slower on a shared 2-core
    machine. On an idle machine the runtime's default (spin briefly, then sleep) is kept:
    there, ``PASSIVE`` made two threads 1.4x slower than the default (D-VAE training step,
    2 threads, ``benchmarks/speed/bench_dvae_epoch.py``) and ``autola-digits-quick`` 2.2x slower
    (its compiled kernels start many short OpenMP regions). OpenMP reads the variable once,
    when torch starts its thread pool, so it must be decided before any torch work.

    Returns:
        The policy now in ``OMP_WAIT_POLICY`` (which this sets to ``PASSIVE`` on a busy
        machine), or ``None`` when the runtime's default is kept.
    """
    if "OMP_WAIT_POLICY" in os.environ:
        return os.environ["OMP_WAIT_POLICY"]
    busy = busy_cpus()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except OSError:  # no load average on this platform
            return None
    if busy >= len(process_cpus()) - 0.5:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        return "PASSIVE"
    return None
