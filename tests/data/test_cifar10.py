"""CIFAR-10 loader on small files written in the standard python-batch format."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from attnas import registry
from attnas.core.errors import DataError
from attnas.data.cifar10 import TEST_FILE, TRAIN_FILES, load_cifar10


def write_batch(path, data, labels, bytes_keys=True):
    key = (lambda s: s.encode()) if bytes_keys else (lambda s: s)
    with open(path, "wb") as f:
        pickle.dump({key("batch_label"): key("x"), key("labels"): list(labels), key("data"): data,
                     key("filenames"): [key(f"{i}.png") for i in range(len(labels))]}, f, protocol=2)


def make_cifar(folder, n=4, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in (*TRAIN_FILES, TEST_FILE):
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n)
        write_batch(folder / name, data, labels)
        written[name] = (data, labels)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": [f"c{i}".encode() for i in range(10)], b"num_vis": 3072}, f, protocol=2)
    return written


def test_loads_images_labels_and_layout(tmp_path):
    written = make_cifar(tmp_path / "cifar-10-batches-py")
    ds = registry.get("dataset", "cifar10")(tmp_path)
    assert ds.train_x.shape == (20, 3, 32, 32) and ds.test_x.shape == (4, 3, 32, 32)
    assert ds.classes == tuple(f"c{i}" for i in range(10))
    data, labels = written["data_batch_2"]
    # row = 1024 red values, then 1024 green, then 1024 blue, each row-major 32 x 32
    img = ds.train_x[4 + 1].numpy()
    assert np.array_equal(img[1], data[1, 1024:2048].reshape(32, 32))
    assert img[2, 3, 5] == data[1, 2048 + 3 * 32 + 5]
    assert ds.train_y.tolist()[4:8] == labels.tolist()
    assert ds.flip and ds.crop_padding == 4


def test_missing_files_are_named(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    make_cifar(folder)
    os.remove(folder / "data_batch_3")
    os.remove(folder / "test_batch")
    with pytest.raises(DataError, match="missing data_batch_3, test_batch in .*cifar-10-batches-py"):
        load_cifar10(folder)


def test_wrong_shape_and_labels(tmp_path):
    folder = tmp_path / "c"
    make_cifar(folder)
    write_batch(folder / "data_batch_1", np.zeros((2, 100), np.uint8), [0, 1])
    with pytest.raises(DataError, match="data_batch_1: 'data' must have shape \\(N, 3072\\)"):
        load_cifar10(folder)
    write_batch(folder / "data_batch_1", np.zeros((2, 3072), np.uint8), [0, 12])
    with pytest.raises(DataError, match="data_batch_1: label 12 out of range 0..9"):
        load_cifar10(folder)
    write_batch(folder / "data_batch_1", np.zeros((2, 3072), np.uint8), [0])
    with pytest.raises(DataError, match="2 images but 1 labels"):
        load_cifar10(folder)


def test_string_keys_are_accepted(tmp_path):
    folder = tmp_path / "c"
    make_cifar(folder)
    write_batch(folder / "test_batch", np.full((3, 3072), 7, np.uint8), [1, 2, 3], bytes_keys=False)
    assert load_cifar10(folder).test_y.tolist() == [1, 2, 3]


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_code_in_a_pickle_is_refused(tmp_path):
    folder = tmp_path / "c"
    make_cifar(folder)
    with open(folder / "data_batch_4", "wb") as f:
        pickle.dump({b"data": Evil(), b"labels": []}, f)
    with pytest.raises(DataError, match="data_batch_4 is not a CIFAR-10 python batch.*refusing to load"):
        load_cifar10(folder)
