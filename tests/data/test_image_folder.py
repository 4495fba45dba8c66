"""A user's class-per-folder images (PNG via Pillow, and .npy arrays)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from attnas.core.errors import DataError
from attnas.data.image_folder import load_image_folder


def write_png(path, value, size=(6, 5), mode="RGB"):
    path.parent.mkdir(parents=True, exist_ok=True)
    shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
    Image.fromarray(np.full(shape, value, np.uint8), mode).save(path)


def test_class_folders_with_held_out_test(tmp_path):
    for i in range(5):
        write_png(tmp_path / "cat" / f"{i}.png", 10 + i)
        write_png(tmp_path / "dog" / f"{i}.png", 100 + i)
    (tmp_path / "dog" / "notes.txt").write_text("ignored")
    ds = load_image_folder(tmp_path, test_fraction=0.2)
    assert ds.classes == ("cat", "dog")
    assert ds.train_x.shape == (8, 3, 5, 6) and ds.test_x.shape == (2, 3, 5, 6)
    assert sorted(ds.test_y.tolist()) == [0, 1]
    for x, y in zip(ds.train_x, ds.train_y):  # pixels land with their label
        assert (int(x[0, 0, 0]) >= 100) == (int(y) == 1)


def test_train_test_layout_grey_and_npy(tmp_path):
    write_png(tmp_path / "train" / "a" / "1.png", 1, mode="L")
    write_png(tmp_path / "train" / "b" / "2.png", 2, mode="L")
    (tmp_path / "train" / "b").mkdir(exist_ok=True)
    np.save(tmp_path / "train" / "b" / "3.npy", np.full((5, 6), 0.5, np.float32))
    write_png(tmp_path / "test" / "b" / "4.png", 4, mode="L")
    ds = load_image_folder(tmp_path)
    assert ds.train_x.shape == (3, 1, 5, 6) and ds.test_y.tolist() == [1]
    assert int(ds.train_x[2, 0, 0, 0]) == 128


def test_resize_and_mixed_sizes(tmp_path):
    write_png(tmp_path / "a" / "1.png", 1, size=(6, 5))
    write_png(tmp_path / "a" / "2.png", 1, size=(6, 5))
    write_png(tmp_path / "b" / "3.png", 2, size=(9, 9))
    write_png(tmp_path / "b" / "4.png", 2, size=(9, 9))
    with pytest.raises(DataError, match="is 9x9 but .* is 6x5; set the task's resize option"):
        load_image_folder(tmp_path)
    assert load_image_folder(tmp_path, image_size=4).train_x.shape[1:] == (3, 4, 4)


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_image_folder(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="has no class sub-folders"):
        load_image_folder(tmp_path / "empty")
    write_png(tmp_path / "x" / "a" / "1.png", 1)
    write_png(tmp_path / "x" / "a" / "2.png", 1)
    (tmp_path / "x" / "b").mkdir()
    with pytest.raises(DataError, match="class folder .*b holds no images"):
        load_image_folder(tmp_path / "x")
    (tmp_path / "x" / "b" / "bad.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match="class folder .*b needs at least 2 images"):
        load_image_folder(tmp_path / "x")
    write_png(tmp_path / "x" / "b" / "good.png", 1)
    with pytest.raises(DataError, match="cannot read image .*bad.png"):
        load_image_folder(tmp_path / "x")
