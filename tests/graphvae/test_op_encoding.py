"""One-hot operations vs learnable operation embeddings (Chatzianastasis et al., 2021, Sec. 3.3)."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.graphvae.op_encoding import OperationEncoding


def test_onehot_has_no_parameters():
    enc = OperationEncoding(5, "onehot")
    assert list(enc.parameters()) == [] and enc.out_dim == 5
    assert torch.equal(enc(torch.tensor([[0, 3]])), torch.eye(5)[[0, 3]].unsqueeze(0))


def test_embedding_is_a_trainable_table():
    torch.manual_seed(0)
    enc = OperationEncoding(8, "embedding", dim=3)
    params = list(enc.parameters())
    assert len(params) == 1 and params[0].shape == (8, 3) and params[0].requires_grad
    assert torch.equal(enc(torch.tensor([2, 2]))[0], enc.table()[2])
    loss = enc(torch.tensor([1, 2])).sum()
    loss.backward()
    assert params[0].grad[1].abs().sum() > 0 and params[0].grad[0].abs().sum() == 0


def test_bad_options():
    with pytest.raises(ConfigError, match="unknown operation encoding"):
        OperationEncoding(5, "word2vec")
    with pytest.raises(ConfigError, match="size must be >= 1"):
        OperationEncoding(5, "embedding", dim=0)
