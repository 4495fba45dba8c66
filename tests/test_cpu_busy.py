"""attnas.cpu_busy: busy CPUs from /proc/stat (the command line's OpenMP wait policy)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from attnas.cpu_busy import busy_between, busy_cpus, cpu_times

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
