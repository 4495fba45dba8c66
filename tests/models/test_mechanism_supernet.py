"""The fixed-alpha supernet: averaging, masking, pruning, and the saved pruned state."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.models.mechanism_supernet import DEFAULT_CANDIDATES, MechanismSupernet, SupernetAttention
from attnas.ops.attention_mechanisms import mechanism_names

OPTS = {"local": {"window": 4}, "reformer": {"bucket_size": 4}, "performer": {"features": 16}}


def supernet(mode="homogeneous", mechanisms=("softmax", "local", "performer"), heads=2):
    torch.manual_seed(0)
    return MechanismSupernet(12, 5, mechanisms, mode=mode, dim=16, heads=heads, max_len=32,
                             mechanism_options={m: OPTS[m] for m in mechanisms if m in OPTS}).eval()


def batch():
    g = torch.Generator().manual_seed(0)
    mask = torch.arange(20)[None] < torch.tensor([20, 9])[:, None]
    return {"tokens": torch.randint(1, 12, (2, 20), generator=g) * mask, "mask": mask}


def test_default_candidates_are_all_registered_mechanisms():
    assert set(DEFAULT_CANDIDATES) == set(mechanism_names())


def test_output_is_the_fixed_alpha_average_of_the_blocks():
    layer = SupernetAttention(16, ("softmax", "linear", "sparse"), heads=2, max_len=32)
    x = torch.randn(2, 9, 16)
    expected = sum(b(x) for b in layer.blocks) / 3
    torch.testing.assert_close(layer(x), expected)
    assert not any(n.startswith("alpha") for n, _ in layer.named_parameters())  # no architecture weights


def test_masking_zeroes_one_block_and_keeps_alpha():
    layer = SupernetAttention(16, ("softmax", "linear", "sparse"), heads=2, max_len=32)
    x = torch.randn(2, 9, 16)
    with layer.masked(["linear"]):
        torch.testing.assert_close(layer(x), (layer.blocks[0](x) + layer.blocks[2](x)) / 3)
    torch.testing.assert_close(layer(x), sum(b(x) for b in layer.blocks) / 3)  # restored


def test_dropping_removes_a_block_from_the_average_and_survives_state_dict():
    net = supernet()
    net.drop("local")
    x = torch.randn(2, 9, 16)
    blocks = net.supernet.blocks
    torch.testing.assert_close(net.supernet(x), (blocks[0](x) + blocks[2](x)) / 2)
    assert net.active_names == ["softmax", "performer"]
    fresh = supernet()
    fresh.load_state_dict(net.state_dict())
    assert fresh.active_names == ["softmax", "performer"]
    torch.testing.assert_close(fresh(batch()), net(batch()))


def test_heterogeneous_mode_has_h_single_heads_per_mechanism():
    net = supernet("heterogeneous", ("softmax", "local"), heads=4)
    assert net.block_names == [f"{m}/{i}" for m in ("softmax", "local") for i in range(4)]
    assert all(b.heads == 1 and b.head_dim == 4 for b in net.supernet.blocks)
    for name in ("softmax/1", "softmax/3", "local/0", "local/2"):
        net.drop(name)
    assert net.kept() == {"softmax": 2, "local": 2}
    assert net(batch()).shape == (2, 5)


def test_homogeneous_kept_is_the_single_remaining_mechanism():
    net = supernet()
    net.drop("softmax")
    net.drop("performer")
    assert net.kept() == "local"


def test_mistakes_are_named():
    with pytest.raises(ConfigError, match="did you mean 'softmax'"):
        SupernetAttention(16, ("sofmax",))
    with pytest.raises(ConfigError, match="once"):
        SupernetAttention(16, ("softmax", "softmax"))
    net = supernet()
    with pytest.raises(ConfigError, match="unknown supernet block 'lokal'"):
        net.drop("lokal")
    net.drop("local")
    with pytest.raises(ConfigError, match="already dropped"):
        net.drop("local")
    net.drop("softmax")
    with pytest.raises(ConfigError, match="last active block"):
        net.drop("performer")
    with pytest.raises(ConfigError, match="not a candidate"):
        MechanismSupernet(12, 5, ("softmax",), dim=16, heads=2, mechanism_options={"local": {"window": 4}})


def test_a_few_training_steps_fit_one_batch():
    net = supernet().train()
    b = batch()
    y = torch.tensor([1, 3])
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    first = None
    for _ in range(15):
        loss = torch.nn.functional.cross_entropy(net(b), y)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.5 * first


def test_a_deeper_supernet_masks_and_drops_a_block_in_every_layer():
    torch.manual_seed(0)
    net = MechanismSupernet(12, 5, ("softmax", "local"), dim=16, heads=2, max_len=32, depth=2,
                            mechanism_options={"local": OPTS["local"]}).eval()
    layers = [layer.attention for layer in net.layers]
    assert len(layers) == 2 and layers[0] is net.supernet and layers[0] is not layers[1]
    b = batch()
    with net.masked(["local"]):
        assert all(layer._masked == {1} for layer in layers)
        masked = net(b)
    with net.reuse_outputs(), net.masked(["local"]):
        torch.testing.assert_close(net(b), masked)  # the cache is checked per layer: layer 2's input differs
    net.drop("local")
    assert [layer.active_names for layer in layers] == [["softmax"], ["softmax"]] and net.kept() == "softmax"
    with pytest.raises(ConfigError, match="depth"):
        MechanismSupernet(12, 5, ("softmax", "local"), dim=16, heads=2, max_len=32, depth=0)


def test_path_keep_trains_through_k_drawn_blocks_and_evaluates_through_all():
    """Path dropout: in training, k uniformly drawn blocks run (the others masked, alpha 1/|A|);
    in evaluation every block runs."""
    net = supernet(mechanisms=("softmax", "local", "performer"))
    for m in net.modules():  # no dropout noise: outputs compare exactly across modes
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    b = batch()
    alone = {}
    for name in net.block_names:  # the network with one block kept (what k = 1 trains)
        with torch.no_grad(), net.masked([n for n in net.block_names if n != name]):
            alone[name] = net(b)
    with torch.no_grad():
        full = net(b)
    net.path_keep = 1
    net.train()
    seen = set()
    for step in range(12):
        torch.manual_seed(step)
        with torch.no_grad():
            out = net(b)
        match = [n for n, ref in alone.items() if torch.allclose(out, ref, atol=1e-5)]
        assert len(match) == 1, f"step {step}: the output is not one block's masked network"
        seen.add(match[0])
    assert seen == set(net.block_names)  # every block is drawn sometimes
    net.eval()
    with torch.no_grad():
        torch.testing.assert_close(net(b), full)
    net.path_keep = 3  # k >= |A|: every block, as without path dropout
    net.train()
    with torch.no_grad():
        torch.testing.assert_close(net(b), full)
    with pytest.raises(ConfigError, match="path_keep"):
        MechanismSupernet(12, 5, ("softmax", "local"), dim=16, heads=2, max_len=32, path_keep=-1)
