"""The Transformer encoder classifier works with every mechanism and with a heterogeneous mix."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError, DataError
from attnas.models.transformer_encoder import (
    HeterogeneousAttention,
    TransformerEncoderClassifier,
    sinusoidal_positions,
)
from attnas.ops.attention_mechanisms import mechanism_names

SMALL = {"local": {"window": 4}, "longformer": {"window": 4}, "bigbird": {"block": 4}, "reformer": {"bucket_size": 4},
         "linformer": {"k": 8}, "performer": {"features": 16}, "sparse": {"stride": 4}}


def batch(lengths=(20, 13, 6), vocab=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = max(lengths)
    mask = torch.arange(n)[None] < torch.tensor(lengths)[:, None]
    tokens = torch.randint(1, vocab, (len(lengths), n), generator=g) * mask
    return {"tokens": tokens, "mask": mask}


def model(mechanism, **kw):
    torch.manual_seed(0)
    opts = {m: SMALL[m] for m in ([mechanism] if isinstance(mechanism, str) else mechanism) if m in SMALL}
    return TransformerEncoderClassifier(12, 5, mechanism, dim=16, depth=2, heads=2, max_len=32,
                                        mechanism_options=opts, **kw)


@pytest.mark.parametrize("name", mechanism_names())
def test_every_mechanism_trains_in_an_encoder(name):
    m = model(name)
    b = batch()
    logits = m(b)
    assert logits.shape == (3, 5) and torch.isfinite(logits).all()
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2])).backward()
    assert all(p.grad is not None for p in m.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", ["softmax", "reformer", "bigbird", "linformer"])
@pytest.mark.parametrize("pool,norm", [("mean", "pre"), ("cls", "post")])
def test_logits_do_not_depend_on_padding(name, pool, norm):
    m = model(name, pool=pool, norm=norm).eval()
    for blk in m.modules():
        if hasattr(blk, "freeze_random"):
            blk.freeze_random()
    b = batch()
    longer = {"tokens": torch.cat([b["tokens"], torch.zeros(3, 7, dtype=torch.long)], 1),
              "mask": torch.cat([b["mask"], torch.zeros(3, 7, dtype=torch.bool)], 1)}
    torch.testing.assert_close(m(longer), m(b), atol=1e-5, rtol=1e-4)


def test_heterogeneous_cell_is_the_mean_of_its_single_head_blocks():
    torch.manual_seed(0)
    layer = HeterogeneousAttention(16, {"softmax": 2, "linear": 1, "local": 1}, max_len=32,
                                   options={"local": {"window": 4}})
    assert layer.names == ["softmax/0", "softmax/1", "linear/0", "local/0"]
    assert all(b.heads == 1 and b.head_dim == 4 for b in layer.blocks)
    x = torch.randn(2, 10, 16)
    expected = sum(b(x) for b in layer.blocks) / 4
    torch.testing.assert_close(layer(x), expected)


def test_heterogeneous_model_stacks_the_cell():
    m = model({"softmax": 1, "performer": 1})
    assert all(isinstance(layer.attention, HeterogeneousAttention) for layer in m.layers)
    assert m(batch()).shape == (3, 5)
    assert m.mechanism == {"softmax": 1, "performer": 1}


def test_sinusoidal_positions_match_the_formula():
    pe = sinusoidal_positions(7, 6)
    assert pe[3, 2].item() == pytest.approx(torch.sin(torch.tensor(3 / 10000 ** (2 / 6))).item())
    assert pe[3, 3].item() == pytest.approx(torch.cos(torch.tensor(3 / 10000 ** (2 / 6))).item())


def test_bad_configuration_and_inputs_are_named():
    with pytest.raises(ConfigError, match="unknown attention mechanism|unknown op"):
        model("sofmax")
    with pytest.raises(ConfigError, match="norm"):
        model("softmax", norm="sandwich")
    with pytest.raises(DataError, match="exceeds the model's max_len 32"):
        model("softmax")({"tokens": torch.ones(1, 33, dtype=torch.long), "mask": torch.ones(1, 33, dtype=torch.bool)})
    with pytest.raises(ConfigError, match=r"mechanism: 1 per-layer specs for 2 layers"):
        TransformerEncoderClassifier(12, 5, ["softmax"], dim=16, depth=2, heads=2, max_len=32)


def test_a_per_layer_list_gives_each_layer_its_own_mechanism():
    net = TransformerEncoderClassifier(12, 5, ["linear", {"softmax": 1, "local": 1}], dim=16, depth=2, heads=2,
                                       max_len=32, mechanism_options={"local": SMALL["local"]})
    first, second = (layer.attention for layer in net.layers)
    assert type(first) is type(model("linear").layers[0].attention)
    assert isinstance(second, HeterogeneousAttention) and second.heads == {"softmax": 1, "local": 1}
    assert net.mechanism == ["linear", {"softmax": 1, "local": 1}]
    batch = {"tokens": torch.randint(1, 12, (2, 20)), "mask": torch.ones(2, 20, dtype=torch.bool)}
    assert net(batch).shape == (2, 5)
