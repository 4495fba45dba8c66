"""AutoAttend on text: supernet == standalone with inherited weights, no padding leaks, plain modules."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from attnas.core.arch import Arch
from attnas.core.errors import ConfigError
from attnas.ops.autoattend.sequence_attention import SelfAttentionOp, SequenceAttention
from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
from attnas.spaces.autoattend_text import TextAdapter
from attnas.tasks.base import TaskInfo
from attnas.tasks.text_classification import TextBatch

V, D, C = 40, 10, 3


class TinyTextTask:
    """A stand-in text task: random embeddings and right-padded token batches."""

    def __init__(self, seed=0):
        emb = torch.randn(V, D, generator=torch.Generator().manual_seed(seed))
        emb[0] = 0
        self.info = TaskInfo("text", D, C, extra={"embeddings": lambda: emb.clone(), "pad_id": 0, "max_len": 16})
        self.device = torch.device("cpu")

    @staticmethod
    def batch(lengths, L=None, seed=0):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.tensor(lengths)
        L = L or int(lengths.max())
        mask = torch.arange(L)[None] < lengths[:, None]
        tokens = torch.randint(1, V, (len(lengths), L), generator=g).masked_fill(~mask, 0)
        return TextBatch(tokens, mask, lengths, torch.randint(0, C, (len(lengths),), generator=g), lengths.clone())


def text_space(**kw):
    opts = dict(layers=4, hidden=16, pool="text", heads=4, dropout=0.1, attn_dropout=0.1)
    opts.update(kw)
    return AutoAttendSpace(AutoAttendConfig(**opts))


def repad(batch: TextBatch, L: int) -> TextBatch:
    """The same sentences padded to length ``L`` (pad tokens are id 0)."""
    B, L0 = batch.tokens.shape
    tokens = torch.zeros(B, L, dtype=torch.long)
    tokens[:, :L0] = batch.tokens
    mask = torch.arange(L)[None] < batch.lengths[:, None]
    return TextBatch(tokens, mask, batch.lengths, batch.y, batch.lengths_cpu)


@pytest.mark.parametrize("context", ["fc", "nc"])
def test_supernet_equals_standalone_with_inherited_weights(context):
    torch.manual_seed(0)
    task, space = TinyTextTask(), text_space(context=context)
    supernet = space.supernet(task).eval()
    for p in supernet.parameters():  # LayerNorms start at 1/0: make every weight matter
        nn.init.normal_(p, 0.0, 0.3)
    batch = task.batch([5, 2, 7, 1])
    rng = random.Random(0)
    for _ in range(12):
        arch = space.sample(rng)
        model = space.build(arch, task).eval()
        model.load_from_supernet(supernet)
        with torch.no_grad():
            torch.testing.assert_close(supernet(batch, arch), model(batch), atol=1e-5, rtol=1e-5)


def test_supernet_training_step_matches_standalone_gradients():
    torch.manual_seed(1)
    task, space = TinyTextTask(), text_space(dropout=0.0, attn_dropout=0.0)
    supernet = space.supernet(task).train()
    arch = space.sample(random.Random(3))
    model = space.build(arch, task).train()
    model.load_from_supernet(supernet)
    batch = task.batch([4, 6, 3])
    nn.functional.cross_entropy(supernet(batch, arch), batch.y).backward()
    nn.functional.cross_entropy(model(batch), batch.y).backward()
    torch.testing.assert_close(supernet.stem.proj.weight.grad, model.stem.proj.weight.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(supernet.head.classifier.weight.grad, model.head.classifier.weight.grad,
                               atol=1e-5, rtol=1e-4)
    used = {id(p) for p in supernet.parameters_of(arch)}
    for name, p in supernet.named_parameters():
        if id(p) not in used:
            assert p.grad is None, name


def test_padding_never_leaks():
    torch.manual_seed(2)
    task, space = TinyTextTask(), text_space(layers=5)
    supernet = space.supernet(task).eval()
    for p in supernet.parameters():
        nn.init.normal_(p, 0.0, 0.3)
    batch = task.batch([3, 6, 1, 4])
    rng = random.Random(5)
    for _ in range(10):
        arch = space.sample(rng)
        with torch.no_grad():
            out = supernet(batch, arch)
            # more padding does not change any sentence's logits ...
            torch.testing.assert_close(supernet(repad(batch, 11), arch), out, atol=1e-5, rtol=1e-5)
            # ... and neither do the other sentences of the batch
            alone = torch.cat([supernet(TextBatch(batch.tokens[i:i + 1, :n], batch.mask[i:i + 1, :n],
                                                  batch.lengths[i:i + 1], batch.y[i:i + 1],
                                                  batch.lengths_cpu[i:i + 1]), arch)
                               for i, n in enumerate(batch.lengths.tolist())])
            torch.testing.assert_close(alone, out, atol=1e-5, rtol=1e-5)


def test_build_is_a_plain_module_with_only_the_used_pieces():
    task, space = TinyTextTask(), text_space(layers=3)
    arch = Arch("autoattend", {"layers": [
        {"type": "attn", "inputs": [{"source": 0, "op": "conv3"}, {"source": 0, "op": "gru"},
                                    {"source": 0, "op": "identity"}]},
        {"type": "add", "inputs": [{"source": 1, "op": "max_pool3"}, {"source": 0, "op": "zero"}]},
        {"type": "add", "inputs": [{"source": 2, "op": "conv1"}, {"source": 1, "op": "identity"}]},
    ]})
    model = space.build(arch, task)
    assert isinstance(model, nn.Module) and not hasattr(model, "sharing")
    assert sorted(model.ops) == ["L1_0", "L1_1", "L2_0", "L3_0"]
    assert list(model.attention) == ["1"] and isinstance(model.attention["1"], SequenceAttention)
    out = model(task.batch([3, 5]))
    assert out.shape == (2, C)
    # a round trip through the state dict rebuilds the same function
    again = space.build(arch, task)
    again.load_state_dict(model.state_dict())
    model.eval(), again.eval()
    b = task.batch([4, 2], seed=3)
    torch.testing.assert_close(model(b), again(b))


def test_each_attention_layer_has_its_own_norm_in_the_supernet():
    task, space = TinyTextTask(), text_space(layers=3)
    supernet = space.supernet(task)
    assert sorted(supernet.attention) == ["1", "2", "3"]
    assert supernet.attention["1"].norm is not supernet.attention["2"].norm


def test_table6_baseline_space_has_self_attention_and_no_attention_layer():
    task = TinyTextTask()
    space = text_space(layer_types=("add",),
                       ops=("zero", "identity", "conv1", "conv3", "max_pool3", "gru", "self_attention"))
    rng = random.Random(0)
    archs = [space.sample(rng) for _ in range(30)]
    assert all(layer["type"] == "add" for a in archs for layer in a.choices["layers"])
    assert any(c["op"] == "self_attention" for a in archs for layer in a.choices["layers"] for c in layer["inputs"])
    supernet = space.supernet(task)
    assert len(supernet.attention) == 0
    assert any(isinstance(m, SelfAttentionOp) for m in supernet.ops.values())
    batch = task.batch([3, 4])
    for a in archs[:5]:
        model = space.build(a, task).eval()
        model.load_from_supernet(supernet.eval())
        with torch.no_grad():
            torch.testing.assert_close(supernet(batch, a), model(batch), atol=1e-5, rtol=1e-5)
    # the default pool leaves self-attention out (it is the ablation's stand-in for the attention layer)
    assert "self_attention" not in text_space().ops


def test_adapter_options_are_validated():
    task = TinyTextTask()
    with pytest.raises(ConfigError, match="space.options.pooling"):
        text_space(options={"pooling": "median"}).supernet(task)
    with pytest.raises(ConfigError, match="poolin"):
        text_space(options={"poolin": "max"}).supernet(task)
    with pytest.raises(ConfigError, match="'text' operation pool"):
        AutoAttendSpace(AutoAttendConfig(layers=2, hidden=16, pool="pyg")).supernet(task)
    frozen = text_space(options={"freeze_embeddings": True, "pooling": "mean"}).supernet(task)
    assert not frozen.stem.embedding.weight.requires_grad
    assert isinstance(TextAdapter(text_space(), task.info).op("gru", 16, 16, last=False), nn.Module)
