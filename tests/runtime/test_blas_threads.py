"""The BLAS thread limit applied to libraries loaded after ``attnas --threads`` (scipy's OpenBLAS)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_blas_limited_holds_a_blas_loaded_after_the_command_started():
    """scipy's own OpenBLAS, imported after ``--threads 1``, runs one thread inside ``blas_limited``."""
    pytest.importorskip("threadpoolctl")
    code = ("import sys\n"
            "from threadpoolctl import threadpool_info\n"
            "from attnas.cli import main\n"
            "sys.argv = ['attnas', '--threads', '1', 'list', 'tasks']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import scipy.linalg, sklearn.gaussian_process\n"
            "from attnas.runtime.blas_threads import blas_limited\n"
            "counts = lambda: sorted({p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'})\n"
            "with blas_limited():\n    print('INSIDE', counts())\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=Path(__file__).parents[2], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "INSIDE [1]" in proc.stdout


def test_blas_limited_is_a_no_op_without_a_limit():
    """Without ``--threads`` the context changes nothing."""
    from attnas.runtime import blas_threads

    blas_threads.set_blas_limit(None)
    with blas_threads.blas_limited() as limiter:
        assert limiter is None
