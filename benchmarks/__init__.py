"""Scripts that measure attnas, run as modules from the repository root.

- ``benchmarks/speed/``: speed benchmarks (``python -m benchmarks.speed.kernel_value``).
- ``benchmarks/checks/``: checks against outside services that the tests cannot start
  (``python -m benchmarks.checks.mlflow_server_check``).
- ``benchmarks/_common.py``: what more than one script shares (timing, finished searches).

The one-question studies, table builders and protocol scripts of a results page live beside
that page, in ``docs/results/<page>/`` (``python -m docs.results.autoattend_graph.rerank_study``).
"""
