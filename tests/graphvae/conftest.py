"""Graph-VAE tests run many tiny tensor operations: one torch thread is much faster for
them on a shared machine (two OpenMP threads mostly wait for each other there)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
