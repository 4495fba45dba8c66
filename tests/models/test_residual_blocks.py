"""Residual AutoAttend networks (``space.block: residual``): Platonov et al.'s block written out by
hand, the supernet against the stand-alone model, the layers a residual layer needs, the options."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnas.core.errors import ConfigError
from attnas.models.autoattend_network import plan
from attnas.models.residual_blocks import PreNormResidual
from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace
from tests.models.test_autoattend_network import TinyTask, assert_standalone_equals_supernet


def _space(**change) -> AutoAttendSpace:
    opts = dict(layers=3, hidden=16, pool="hetero", stem="project", head="linear", block="residual", act="gelu",
                dropout=0.2, attn_dropout=0.2)
    return AutoAttendSpace(AutoAttendConfig(**{**opts, **change}))


def _chain(op: str, layers: int) -> dict:
    return {"layers": [{"type": "add", "inputs": [{"source": t - 1, "op": op}, {"source": 0, "op": "zero"}]}
                       for t in range(1, layers + 1)]}


def test_a_sage_chain_is_platonovs_graphsage_block_by_block():
    """h_t = h_{t-1} + W2 GELU(W_l mean_u LN(h)_u + W_r LN(h) + b) + b2; logits = W_c LN(h_n) + b_c."""
    torch.manual_seed(0)
    task, space = TinyTask(), _space()
    model = space.build(space.arch(_chain("sage", 3)), task).eval()
    x, (src, dst) = task.x, task.edge_index
    deg = torch.zeros(x.size(0)).index_add_(0, dst, torch.ones(dst.numel())).clamp_min(1)
    h = model.stem.proj(x)
    for t in range(1, 4):
        conv = model.ops[f"L{t}_0"].conv
        z = model.blocks.norms[t - 1](h)
        mean = torch.zeros_like(z).index_add_(0, dst, z[src]) / deg.unsqueeze(-1)
        a = F.gelu(conv.lin_l(mean) + conv.lin_r(z))
        h = h + model.blocks.updates[t - 1](a)
    by_hand = model.head.lin(model.blocks.norms[3](h))
    with torch.no_grad():
        assert torch.allclose(model(task.batch()), by_hand, atol=1e-5)


def test_the_residual_supernet_runs_what_the_stand_alone_models_run():
    torch.manual_seed(0)
    task, space = TinyTask(), _space()
    supernet = space.supernet(task).eval()
    assert_standalone_equals_supernet(space, task, supernet, archs=8)
    arch = space.sample(__import__("random").Random(3))
    shared = {id(p) for p in supernet.blocks.parameters()}
    assert shared and shared <= {id(p) for p in supernet.parameters_of(arch)}  # the blocks are counted


def test_a_residual_layer_needs_the_layer_before_it():
    arch = _space().arch({"layers": [
        {"type": "add", "inputs": [{"source": 0, "op": "linear"}, {"source": 0, "op": "zero"}]},
        {"type": "add", "inputs": [{"source": 1, "op": "sage"}, {"source": 0, "op": "zero"}]},
        {"type": "add", "inputs": [{"source": 2, "op": "zero"}, {"source": 0, "op": "gcn"}]}]})
    needed = lambda residual: [step[2] for step in plan(arch, "fc", residual)]  # noqa: E731
    assert needed(False) == [False, False, True]  # layer 3 reads only the input
    assert needed(True) == [True, True, True]  # h_3 = h_2 + ..., h_2 = h_1 + ...


def test_the_update_adds_a_dropped_projection_to_the_previous_layer():
    blocks = PreNormResidual([4, 4, 4], dropout=0.5)
    h, a = torch.randn(6, 4), torch.randn(6, 4)
    assert torch.allclose(blocks.eval().update(2, h, a), h + blocks.updates[1](a))
    torch.manual_seed(0)
    dropped = blocks.train().update(2, h, a) - h  # kept entries doubled, the others zero
    full = blocks.updates[1](a)
    assert torch.all(torch.isclose(dropped, 2 * full, atol=1e-6) | (dropped == 0)) and (dropped == 0).any()
    with pytest.raises(ValueError, match="one width"):
        PreNormResidual([7, 4, 4], dropout=0.0)


@pytest.mark.parametrize("change", [{"stem": "raw"}, {"head": "none"}])
def test_residual_blocks_refuse_a_changing_width(change):
    with pytest.raises(ConfigError, match="space.block: 'residual' needs stem 'project' and head 'linear'"):
        _space(**change)


def test_the_residual_baselines_are_platonovs_models_at_the_spaces_depth():
    space = _space(layers=4)
    rows = space.baselines()
    res = {k: v for k, v in rows.items() if k.startswith("res_")}
    assert sorted(res) == ["res_gat", "res_gat_sep", "res_gcn", "res_mlp", "res_sage"]
    assert "mlp" in rows and "h2gcn" in rows  # the two-layer baselines stay
    for row in res.values():
        assert row.space is None  # trained in the searched space, under the recipe's options
        space.validate(space.arch(row.arch))
    assert res["res_gat_sep"].arch == _chain("gat_sep_8", 4)
    assert "res_mlp" not in _space(block="plain").baselines()


def test_the_latency_parts_time_every_norm_and_update():
    task, space = TinyTask(), _space()
    model = space.build(space.arch(_chain("gcn", 3)), task).eval()
    parts = model.latency_parts(task.batch())
    kinds = [signature[0] for signature, _ in parts]
    assert kinds.count("norm") == 4 and kinds.count("residual") == 3  # LayerNorm_0..3, updates 1..3
    with torch.no_grad():
        for _, run in parts:
            run()
