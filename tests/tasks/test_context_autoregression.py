"""Context auto-regression masks, masked input and the L1 loss on hidden pixels."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError, DataError
from attnas.tasks._context_autoregression import context_masks, mask_images, masked_l1_loss


@pytest.mark.parametrize("height, width", [(32, 32), (28, 28), (8, 8), (7, 5)])
def test_masks_cover_at_most_a_quarter_and_at_least_one_pixel(height, width):
    masks = context_masks(256, height, width, generator=torch.Generator().manual_seed(height))
    assert masks.shape == (256, 1, height, width) and masks.dtype == torch.bool
    covered = masks.flatten(1).sum(1)
    assert covered.min() >= 1
    assert covered.max() <= int(0.25 * height * width)
    assert covered.float().mean() > 0.05 * height * width  # not trivially tiny


def test_masks_are_reproducible_from_a_seed():
    a = context_masks(8, 16, 16, generator=torch.Generator().manual_seed(5))
    b = context_masks(8, 16, 16, generator=torch.Generator().manual_seed(5))
    c = context_masks(8, 16, 16, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_masks_are_several_rectangles():
    masks = context_masks(64, 32, 32, generator=torch.Generator().manual_seed(0), max_boxes=4)
    # a single rectangle fills its bounding box; several boxes usually do not
    not_one_box = 0
    for m in masks[:, 0]:
        rows, cols = m.any(1).nonzero(), m.any(0).nonzero()
        box = (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
        not_one_box += int(m.sum() < box)
    assert not_one_box > 10
    one = context_masks(16, 32, 32, generator=torch.Generator().manual_seed(0), max_boxes=1)
    for m in one[:, 0]:
        rows, cols = m.any(1).nonzero(), m.any(0).nonzero()
        assert m.sum() == (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)


def test_mask_images_hides_only_masked_pixels():
    x = torch.randn(2, 3, 6, 6)
    mask = context_masks(2, 6, 6, generator=torch.Generator().manual_seed(1))
    y = mask_images(x, mask, fill=0.0)
    m = mask.expand_as(x)
    assert torch.all(y[m] == 0) and torch.equal(y[~m], x[~m])


def test_l1_is_taken_on_hidden_pixels_only():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 2, 8, 8, generator=gen)
    recon = torch.randn(3, 2, 8, 8, generator=gen)
    mask = context_masks(3, 8, 8, generator=gen)
    loss = masked_l1_loss(recon, x, mask)
    m = mask.expand_as(x)
    torch.testing.assert_close(loss, (recon - x).abs()[m].mean())
    changed = recon.clone()
    changed[~m] += 10.0  # visible pixels do not count
    torch.testing.assert_close(masked_l1_loss(changed, x, mask), loss)


def test_bad_inputs_are_named():
    with pytest.raises(ConfigError, match="max_fraction"):
        context_masks(1, 8, 8, max_fraction=0.0)
    with pytest.raises(ConfigError, match="too small"):
        context_masks(1, 1, 3)
    with pytest.raises(DataError, match="bool"):
        mask_images(torch.randn(1, 1, 4, 4), torch.ones(1, 1, 4, 4))
    with pytest.raises(DataError, match="reconstruction"):
        masked_l1_loss(torch.randn(1, 1, 4, 5), torch.randn(1, 1, 4, 4), torch.ones(1, 1, 4, 4, dtype=torch.bool))
