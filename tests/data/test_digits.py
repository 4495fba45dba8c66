"""scikit-learn's digits as an image dataset."""

from __future__ import annotations

import numpy as np

from attnas import registry


def test_digits_split_and_format(tmp_path):
    ds = registry.get("dataset", "digits")(tmp_path)  # needs no data root
    assert ds.train_x.shape == (1437, 1, 8, 8) and ds.test_x.shape == (360, 1, 8, 8)
    assert ds.train_x.max() == 255 and not ds.flip
    counts = np.bincount(ds.test_y.numpy())
    assert counts.min() >= 35 and counts.max() <= 37  # stratified: about 36 per class
    from sklearn.datasets import load_digits

    total = load_digits().images.sum() * 255 / 16
    got = ds.train_x.double().sum() + ds.test_x.double().sum()
    assert abs(float(got) - total) / total < 0.01  # every image is used once, rescaled
