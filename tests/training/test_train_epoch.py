"""train_epoch steps only the parameters with a gradient: the same update, bit for bit."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnas.config import OptimConfig
from attnas.training.train import make_optimizer, step_with_gradients, train_epoch


class SubsetNet(nn.Module):
    """A toy supernet: every forward uses 2 of 30 branches, drawn from its own generator."""

    def __init__(self):
        super().__init__()
        self.branches = nn.ModuleList(nn.Linear(4, 4) for _ in range(30))
        self.head = nn.Linear(4, 3)
        self.gen = torch.Generator().manual_seed(7)

    def forward(self, x):
        idx = torch.randperm(30, generator=self.gen)[:2].tolist()
        return self.head(sum(torch.tanh(self.branches[i](x)) for i in idx))


class ToyTask:
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(40, 4, generator=g), torch.randint(0, 3, (40,), generator=g)

    def batches(self, split, shuffle=False, generator=None, batch_size=8):
        order = torch.randperm(40, generator=generator)
        for i in range(0, 40, batch_size):
            idx = order[i : i + batch_size]
            yield SimpleNamespace(x=self.x[idx], y=self.y[idx])

    def loss(self, out, batch):
        return F.cross_entropy(out, batch.y)


def reference_epoch(model, task, opt, params, cfg, gen):
    """The plain loop (zero all, backward, clip all, step all)."""
    for batch in task.batches("train", shuffle=True, generator=gen, batch_size=cfg.batch_size):
        opt.zero_grad(set_to_none=True)
        task.loss(model(batch.x), batch).backward()
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()


@pytest.mark.parametrize("optimizer,weight_decay", [("adam", 0.0), ("adam", 5e-4), ("sgd", 1e-3)])
def test_same_weights_and_optimizer_state_as_the_plain_loop(optimizer, weight_decay):
    torch.manual_seed(0)
    model_a = SubsetNet()
    model_b = copy.deepcopy(model_a)
    cfg = OptimConfig(lr=0.05, optimizer=optimizer, weight_decay=weight_decay, batch_size=8, grad_clip=0.5)
    task = ToyTask()
    pa, pb = list(model_a.parameters()), list(model_b.parameters())
    opt_a, opt_b = make_optimizer(pa, cfg), make_optimizer(pb, cfg)
    for _ in range(2):
        reference_epoch(lambda x: model_a(x), task, opt_a, pa, cfg, torch.Generator().manual_seed(1))
        train_epoch(lambda batch: model_b(batch.x), task, opt_b, pb, cfg, torch.Generator().manual_seed(1))
    for a, b in zip(pa, pb):
        assert torch.equal(a, b)
    sa, sb = opt_a.state_dict()["state"], opt_b.state_dict()["state"]
    assert sa.keys() == sb.keys()
    if optimizer == "adam":
        assert len(sa) < len(pa)  # some branches were never used: no state, never stepped
    for k in sa:
        for name in sa[k]:
            assert torch.equal(torch.as_tensor(sa[k][name]), torch.as_tensor(sb[k][name])), (k, name)
    assert all(p.grad is None for p in pb)
    assert opt_b.param_groups[0]["params"] is not None and len(opt_b.param_groups[0]["params"]) == len(pb)


def test_step_with_gradients_restores_the_group_even_on_error():
    p, q = nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p, q], lr=0.1)
    p.grad = torch.ones(2)
    step_with_gradients(opt, [p])
    assert torch.equal(p.detach(), torch.full((2,), 0.9)) and torch.equal(q.detach(), torch.ones(2))
    assert opt.param_groups[0]["params"] == [p, q]

    def failing_step(closure=None):
        raise RuntimeError("step failed")

    opt.step = failing_step
    with pytest.raises(RuntimeError, match="step failed"):
        step_with_gradients(opt, [p])
    assert opt.param_groups[0]["params"] == [p, q]
