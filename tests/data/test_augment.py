"""Pad-and-crop and flips on tensors."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnas.data.augment import random_crop, random_flip


def test_crop_is_a_window_of_the_padded_image():
    x = torch.randn(6, 2, 5, 4)
    out = random_crop(x, 2, torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(0)
    oy, ox = torch.randint(0, 5, (6,), generator=g), torch.randint(0, 5, (6,), generator=g)
    padded = F.pad(x, (2, 2, 2, 2))
    for b in range(6):
        assert torch.equal(out[b], padded[b, :, oy[b]: oy[b] + 5, ox[b]: ox[b] + 4])
    assert torch.equal(random_crop(x, 0), x)


def test_crops_vary_and_flip_mirrors():
    x = torch.arange(64 * 9, dtype=torch.float).reshape(64, 1, 3, 3)
    out = random_crop(x, 1, torch.Generator().manual_seed(1))
    assert 1 < sum(not torch.equal(out[i], x[i]) for i in range(64)) < 64
    flipped = random_flip(x, torch.Generator().manual_seed(2))
    same = [torch.equal(flipped[i], x[i]) for i in range(64)]
    mirrored = [torch.equal(flipped[i], x[i].flip(-1)) for i in range(64)]
    assert all(s or m for s, m in zip(same, mirrored)) and 10 < sum(mirrored) < 54
