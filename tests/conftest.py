"""Shared test set-up: point ATTNAS_DATA at ../shared/data when it exists, keep torch small."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()

if "ATTNAS_DATA" not in os.environ and SHARED_DATA.exists():
    os.environ["ATTNAS_DATA"] = str(SHARED_DATA)

torch.set_num_threads(min(2, torch.get_num_threads()))


def shared_data() -> Path | None:
    """The real data root, or None when it is not available."""
    root = os.environ.get("ATTNAS_DATA")
    return Path(root) if root and Path(root).exists() else None


@pytest.fixture
def data_root() -> Path:
    """The real data root; skips the test when ../shared/data is absent."""
    root = shared_data()
    if root is None:
        pytest.skip("real data not available (set ATTNAS_DATA)")
    return root

os.environ.setdefault("ATTNAS_PROGRESS", "0")
