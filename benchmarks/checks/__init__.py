"""Checks of attnas against outside services the tests cannot start (``python -m benchmarks.checks.<name>``)."""
