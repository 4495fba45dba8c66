"""attnas.runtime.cpu_busy: busy CPUs from /proc/stat (the command line's OpenMP wait policy)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from attnas.runtime import cpu_busy
from attnas.runtime.cpu_busy import busy_between, busy_cpus, choose_omp_wait_policy, cpu_times

STAT = """cpu  300 0 100 600 0 0 0 0 0 0
cpu0 100 0 50 300 0 0 0 0 0 0
cpu1 200 0 50 300 0 0 0 0 0 0
intr 12345
ctxt 678
"""


def test_cpu_times_reads_each_cpu(tmp_path):
    path = tmp_path / "stat"
    path.write_text(STAT)
    assert cpu_times(str(path)) == {0: (450, 300), 1: (550, 300)}


def test_busy_between_counts_busy_fractions_on_the_given_cpus():
    before = {0: (1000, 500), 1: (1000, 500), 2: (1000, 500)}
    after = {0: (1100, 500), 1: (1100, 550), 2: (1100, 600)}  # busy 1.0, 0.5, 0.0
    assert busy_between(before, after, [0, 1, 2]) == pytest.approx(1.5)
    assert busy_between(before, after, [1]) == pytest.approx(0.5)
    assert busy_between(before, after, [7]) == 0.0  # a CPU without counts adds nothing


def test_busy_cpus_without_proc_stat_is_none(tmp_path):
    assert busy_cpus(0.01, str(tmp_path / "missing")) is None


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc/stat")
def test_a_spinning_process_is_seen():
    spin = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 3: pass"])
    try:
        time.sleep(0.3)  # the child is running
        busy = busy_cpus(0.5)
    finally:
        spin.kill()
        spin.wait()
    assert busy is not None and busy >= 0.6


@pytest.mark.parametrize("busy, expected", [(0.3, None), (1.6, "PASSIVE")])
def test_omp_wait_policy_sleeps_only_when_other_work_keeps_the_cpus_busy(monkeypatch, busy, expected):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(cpu_busy, "busy_cpus", lambda: busy)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))  # not used where /proc/stat is read
    assert choose_omp_wait_policy() == expected
    assert os.environ.get("OMP_WAIT_POLICY") == expected


@pytest.mark.parametrize("load, expected", [(0.3, None), (1.6, "PASSIVE")])
def test_omp_wait_policy_falls_back_to_the_load_average(monkeypatch, load, expected):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(cpu_busy, "busy_cpus", lambda: None)  # no /proc/stat
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert choose_omp_wait_policy() == expected
    assert os.environ.get("OMP_WAIT_POLICY") == expected


def test_omp_wait_policy_keeps_the_users_choice(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    assert choose_omp_wait_policy() == "ACTIVE"
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
