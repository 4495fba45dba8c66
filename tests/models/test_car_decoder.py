"""Context auto-regression encoder-decoder."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from attnas.core.errors import ConfigError, DataError
from attnas.models.car_decoder import CARDecoder, ContextAutoregressionModel
from attnas.spaces.stagewise import StagewiseSpace
from attnas.tasks._context_autoregression import context_masks, mask_images, masked_l1_loss
from attnas.tasks.base import TaskInfo



@pytest.fixture(autouse=True)
def _one_thread():
    """The relaxed network runs ~100 small blocks: one thread avoids OpenMP hand-offs on a busy machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)

def test_decoder_upsamples_back_to_the_image():
    dec = CARDecoder(64, 3)
    assert dec(torch.randn(2, 64, 8, 8)).shape == (2, 3, 32, 32)
    assert dec(torch.randn(2, 64, 7, 7), size=(28, 28)).shape == (2, 3, 28, 28)
    assert dec(torch.randn(1, 64, 2, 2), size=(7, 5)).shape == (1, 3, 7, 5)
    with pytest.raises(DataError, match=r"\[B, 64, h, w\]"):
        dec(torch.randn(1, 32, 2, 2))


def test_relaxed_supernet_as_encoder_shares_alpha_and_learns_it_from_l1():
    task = SimpleNamespace(info=TaskInfo("image", 1, 10, extra={"image_size": 8}))
    relaxed = StagewiseSpace().relaxed(task)
    model = ContextAutoregressionModel(relaxed, image_channels=1)
    assert model.arch_parameters() == [relaxed.alpha]
    weight_ids = {id(p) for p in model.weight_parameters()}
    assert id(relaxed.alpha) not in weight_ids
    assert not weight_ids & {id(p) for p in relaxed.classifier.parameters()}
    assert weight_ids >= {id(p) for p in model.decoder.parameters()}

    gen = torch.Generator().manual_seed(0)
    images = torch.randn(2, 1, 8, 8, generator=gen)
    mask = context_masks(2, 8, 8, generator=gen)
    recon = model(mask_images(images, mask))
    assert recon.shape == images.shape
    masked_l1_loss(recon, images, mask).backward()
    assert relaxed.alpha.grad is not None and relaxed.alpha.grad.abs().sum() > 0


def test_encoder_without_features_is_refused():
    with pytest.raises(ConfigError, match="features"):
        ContextAutoregressionModel(torch.nn.Linear(2, 2), 1)
