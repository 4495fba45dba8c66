"""Fashion-MNIST from the real IDX files, and the IDX reader's errors."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from attnas import registry
from attnas.core.errors import DataError
from attnas.data.fashion_mnist import read_idx


def test_real_fashion_mnist(data_root):
    ds = registry.get("dataset", "fashion-mnist")(data_root)
    assert ds.train_x.shape == (60000, 1, 28, 28) and ds.test_x.shape == (10000, 1, 28, 28)
    assert ds.num_classes == 10 and ds.classes[9] == "Ankle boot"
    # the dataset is balanced: 6,000 training and 1,000 test images per class
    assert np.bincount(ds.train_y.numpy()).tolist() == [6000] * 10
    assert np.bincount(ds.test_y.numpy()).tolist() == [1000] * 10
    assert ds.train_x.max() == 255 and ds.train_x.min() == 0


def write_idx(path, arr, dtype_code=0x08, magic=(0, 0)):
    header = bytes([magic[0], magic[1], dtype_code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def test_idx_round_trip_and_errors(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a.gz", arr)
    assert np.array_equal(read_idx(tmp_path / "a.gz", 3), arr)
    with pytest.raises(DataError, match="3 dimensions, expected 1"):
        read_idx(tmp_path / "a.gz", 1)
    write_idx(tmp_path / "b.gz", arr, dtype_code=0x0D)
    with pytest.raises(DataError, match="data type 0x0d"):
        read_idx(tmp_path / "b.gz", 3)
    with gzip.open(tmp_path / "c.gz", "wb") as f:
        f.write(bytes([0, 0, 8, 1]) + struct.pack(">I", 10) + b"\x01\x02")
    with pytest.raises(DataError, match="header says \\(10,\\) \\(10 bytes\\) but 2 bytes follow"):
        read_idx(tmp_path / "c.gz", 1)
    (tmp_path / "d.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match="cannot read .*d.gz"):
        read_idx(tmp_path / "d.gz", 1)


def test_missing_files_are_named(tmp_path):
    (tmp_path / "fashion-mnist").mkdir()
    with pytest.raises(DataError, match="missing train-images-idx3-ubyte.gz, .*t10k-labels-idx1-ubyte.gz"):
        registry.get("dataset", "fashion-mnist")(tmp_path)
