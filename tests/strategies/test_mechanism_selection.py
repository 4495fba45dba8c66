"""Masked-drop scoring, homogeneous choice, NAS One-shot and NAS Prune."""

from __future__ import annotations

import pytest
import torch

from attnas.core.errors import ConfigError
from attnas.models.mechanism_supernet import MechanismSupernet
from attnas.strategies._mechanism_selection import (
    frozen_random,
    masked_drop_scores,
    masked_drop_scores_sweep,
    nas_one_shot,
    nas_prune,
    select_homogeneous,
)

OPTS = {"local": {"window": 4}, "reformer": {"bucket_size": 4, "redraw_every": 1}, "performer": {"features": 16}}


def supernet(mode="homogeneous", mechanisms=("softmax", "reformer", "performer", "local"), heads=2):
    torch.manual_seed(0)
    return MechanismSupernet(12, 4, mechanisms, mode=mode, dim=16, heads=heads, max_len=32, dropout=0.0,
                             mechanism_options={m: OPTS[m] for m in mechanisms if m in OPTS})


def data(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.arange(16)[None] < torch.randint(4, 17, (n, 1), generator=g)
    return {"tokens": torch.randint(1, 12, (n, 16), generator=g) * mask, "mask": mask,
            "y": torch.randint(0, 4, (n,), generator=g)}


def accuracy(model, batch):
    with torch.no_grad():
        return (model(batch).argmax(-1) == batch["y"]).float().mean().item()


def test_scores_are_accuracy_drops_when_each_block_is_zeroed():
    net = supernet()
    b = data()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(10):  # a little training so the blocks matter
        loss = torch.nn.functional.cross_entropy(net(b), b["y"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    trial = masked_drop_scores(net, lambda m: accuracy(m, b))
    # the same quantities by an independent route: a forward hook that zeroes block j's output
    net.eval()
    for blk in net.modules():
        if hasattr(blk, "freeze_random"):
            blk.freeze_random()
    base = accuracy(net, b)
    assert trial.base == pytest.approx(base)
    for j, name in enumerate(net.block_names):
        handle = net.supernet.blocks[j].register_forward_hook(lambda mod, inp, out: torch.zeros_like(out))
        assert trial.scores[name] == pytest.approx(base - accuracy(net, b)), name
        handle.remove()
    assert list(trial.scores) == net.block_names
    assert any(abs(s) > 0 for s in trial.scores.values())  # the check is not vacuous


def test_random_structure_is_frozen_and_model_in_eval_while_scoring_then_restored():
    net = supernet().train()
    randomised = [m for m in net.modules() if getattr(m, "has_random", False)]
    states = []

    def evaluate(model):
        states.append((model.training, all(m.frozen for m in randomised)))
        return accuracy(model, data(8))

    masked_drop_scores(net, evaluate)
    assert states and all(s == (False, True) for s in states)
    assert net.training and not any(m.frozen for m in randomised)
    with frozen_random(net):
        assert all(m.frozen for m in randomised)
    assert not any(m.frozen for m in randomised)


class Utility:
    """A synthetic validation accuracy: a set function of the blocks that run.

    x and y are redundant (0.5 each, 0.6 together), z is worth 0.3 and w 0.35. Reads the
    real supernet's active and masked blocks, so selection runs on the real model.
    """

    values = {"x": 0.5, "y": 0.5, "z": 0.3, "w": 0.35}

    def __init__(self, net):
        self.net = net
        self.calls = 0

    def running(self):
        layer = self.net.supernet
        return {layer.mechanisms[j][0] for j, a in enumerate(layer.active.tolist()) if a and j not in layer._masked}

    def __call__(self, model):
        self.calls += 1
        s = self.running()
        xy = 0.6 if {"x", "y"} <= s else 0.5 if s & {"x", "y"} else 0.0
        return xy + 0.3 * ("z" in s) + 0.35 * ("w" in s)


def lettered_supernet():
    """A heterogeneous supernet whose blocks are 'x', 'y', 'z', 'w' (one head each)."""
    net = supernet("heterogeneous", ("softmax", "linear", "local", "sparse"), heads=1)
    letters = dict(zip(("softmax", "linear", "local", "sparse"), "xyzw"))
    net.supernet.mechanisms = [letters[m] for m in net.supernet.mechanisms]
    return net


def test_scores_equal_the_synthetic_marginal_values():
    net = lettered_supernet()
    trial = masked_drop_scores(net, Utility(net))
    assert trial.base == pytest.approx(1.25)
    assert [round(v, 6) for v in trial.scores.values()] == [0.1, 0.1, 0.3, 0.35]


def test_homogeneous_choice_is_the_highest_score():
    net = lettered_supernet()
    winner, trial = select_homogeneous(net, Utility(net))
    assert winner == "sparse/0" and trial.ranking()[0] == winner


def test_one_shot_keeps_the_top_h_and_prune_rescores():
    net = lettered_supernet()
    one = nas_one_shot(net, Utility(net), keep=2)
    assert sorted(one.kept) == ["local/0", "sparse/0"] == sorted(net.active_names)  # z and w
    assert len(one.trials) == 1 and len(one.dropped) == 2

    net = lettered_supernet()
    steps = []
    rounds = []
    pruned = nas_prune(net, lambda m: steps.append(1), Utility(net), keep=2, finetune_steps=3,
                       on_round=lambda r: rounds.append(list(r.kept)))
    # drop y (tie with x, later block), then x alone is worth 0.5 > w 0.35 > z 0.3: z goes
    assert pruned.dropped == ["linear/0", "local/0"]
    assert sorted(pruned.kept) == ["softmax/0", "sparse/0"] == sorted(net.active_names)
    assert len(steps) == 3  # fine-tuning after the first drop only
    assert rounds == [["softmax/0", "local/0", "sparse/0"], ["softmax/0", "sparse/0"]]


@pytest.mark.parametrize("keep", [1, 3, 5])
def test_prune_and_one_shot_keep_exactly_h_heads_of_a_real_model(keep):
    b = data(16)
    for select in ("one-shot", "prune"):
        net = supernet("heterogeneous", ("softmax", "performer", "local"), heads=2)
        evaluate = lambda m: accuracy(m, b)  # noqa: E731
        if select == "one-shot":
            result = nas_one_shot(net, evaluate, keep)
        else:
            opt = torch.optim.SGD(net.parameters(), lr=0.01)

            def step(m):
                m.train()
                loss = torch.nn.functional.cross_entropy(m(b), b["y"])
                opt.zero_grad()
                loss.backward()
                opt.step()

            result = nas_prune(net, step, evaluate, keep, finetune_steps=1)
        assert len(result.kept) == keep == len(net.active_names)
        assert sum(net.kept().values()) == keep
        assert len(result.dropped) == 6 - keep and not set(result.dropped) & set(result.kept)


def test_prune_continues_from_a_reloaded_partly_pruned_model():
    net = lettered_supernet()
    net.drop("linear/0")
    again = lettered_supernet()
    again.load_state_dict(net.state_dict())
    result = nas_prune(again, lambda m: None, Utility(again), keep=2)
    assert result.dropped == ["local/0"]


def test_keep_out_of_range_is_named():
    net = lettered_supernet()
    with pytest.raises(ConfigError, match="keep: must be between 1 and the 4 active blocks"):
        nas_one_shot(net, Utility(net), keep=5)
    with pytest.raises(ConfigError, match="finetune_steps"):
        nas_prune(net, lambda m: None, Utility(net), keep=2, finetune_steps=-1)


def _count(out, batch):
    return int((out.argmax(-1) == batch["y"]).sum()), int(batch["y"].numel())


@pytest.mark.parametrize("mode", ["homogeneous", "heterogeneous"])
def test_one_pass_sweep_gives_the_scores_of_one_evaluation_per_pattern(mode):
    net = supernet(mode)
    b = data(48, seed=1)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(8):
        loss = torch.nn.functional.cross_entropy(net(b), b["y"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    chunks = [{k: v[i:i + 16] for k, v in b.items()} for i in range(0, 48, 16)]

    def evaluate(model):  # the reference: one full pass over the batches per masking pattern
        c = t = 0
        for chunk in chunks:
            cc, tt = _count(model(chunk), chunk)
            c, t = c + cc, t + tt
        return c / t

    reference = masked_drop_scores(net, evaluate)
    calls = []
    hooks = [blk.register_forward_hook(lambda m, i, o: calls.append(1)) for blk in net.supernet.blocks]
    swept = masked_drop_scores_sweep(net, lambda: iter(chunks), _count)
    for h in hooks:
        h.remove()
    assert swept.base == reference.base
    assert swept.scores == reference.scores
    assert any(s != 0 for s in swept.scores.values())  # not vacuous
    assert len(calls) == len(net.supernet.blocks) * len(chunks)  # each block ran once per batch


def test_output_reuse_is_off_in_training_and_for_a_new_input():
    net = supernet().train()
    n = len(net.supernet.blocks)
    b = data(4)
    calls = []
    hooks = [blk.register_forward_hook(lambda m, i, o: calls.append(1)) for blk in net.supernet.blocks]
    with net.reuse_outputs():
        net(b)
        net(b)
        assert len(calls) == 2 * n  # training mode: nothing reused
        net.eval()
        net(b)
        net(b)
        assert len(calls) == 3 * n  # eval: the second call reuses every block
        net(data(4, seed=5))
        assert len(calls) == 4 * n  # another batch runs the blocks again
    net(b)
    assert len(calls) == 5 * n  # outside the with: no reuse
    for h in hooks:
        h.remove()


def test_selection_takes_evaluate_or_trial_not_both():
    net = lettered_supernet()
    with pytest.raises(ConfigError, match="exactly one of evaluate and trial"):
        select_homogeneous(net)
    trial = lambda m: masked_drop_scores(m, Utility(m))  # noqa: E731
    with pytest.raises(ConfigError, match="exactly one of evaluate and trial"):
        nas_one_shot(net, Utility(net), keep=2, trial=trial)
    assert select_homogeneous(net, trial=trial)[0] == "sparse/0"
