"""The BLAS thread limit for libraries loaded after ``attnas --threads`` (the limit itself, through
the command, is tested in tests/test_cli.py::test_threads_limits_numpys_blas_too)."""


def test_blas_limited_is_a_no_op_without_a_limit():
    """Without ``--threads`` the context changes nothing."""
    from attnas.runtime import blas_threads

    blas_threads.set_blas_limit(None)
    with blas_threads.blas_limited() as limiter:
        assert limiter is None


def test_blas_limited_applies_the_recorded_limit():
    """With a limit recorded, the context is threadpoolctl's limiter for that many threads."""
    import pytest

    threadpoolctl = pytest.importorskip("threadpoolctl")
    from attnas.runtime import blas_threads

    blas_threads.set_blas_limit(1)
    try:
        with blas_threads.blas_limited() as limiter:
            assert isinstance(limiter, threadpoolctl.threadpool_limits)
            assert all(p["num_threads"] == 1 for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas")
    finally:
        blas_threads.set_blas_limit(None)
