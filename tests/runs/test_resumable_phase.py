"""ResumablePhase: a loop saved, killed and resumed ends bit for bit as the uninterrupted one."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from attnas.core.errors import CheckpointError
from attnas.runs.resumable_phase import ResumablePhase, Slot
from attnas.runs.run_dir import RunDir

STEPS = 6


class Counter:
    """Plain state kept outside torch (saved through a Slot)."""

    def __init__(self):
        self.value = 0


def build(run: RunDir, seed: int = 0):
    """A tiny training loop's objects: weights, momentum SGD, cosine schedule, batch order, sampler."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.Linear(8, 1))  # dropout: the global RNG
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS)
    gen = torch.Generator().manual_seed(seed + 1)
    py_rng = random.Random(seed + 2)
    counter = Counter()
    phase = ResumablePhase(run, "toy", {"model": model, "optimizer": opt, "scheduler": sched, "generator": gen,
                                        "counter": Slot(lambda: counter.value, lambda v: setattr(counter, "value", v))},
                           py_rng=py_rng, when_done=("model", "counter"))
    return phase, model, opt, gen, py_rng, counter


def train(phase, model, opt, gen, py_rng, counter, stop: int | None = None) -> list[float]:
    """Run the loop to the end (or through step ``stop``), saving every step."""
    data = torch.randn(16, 4, generator=torch.Generator().manual_seed(7))
    losses = []
    sched = phase.objects["scheduler"]
    for step in phase.steps(STEPS):
        order = torch.randperm(16, generator=gen)[: 4 + py_rng.randrange(4)]
        opt.zero_grad()
        loss = model(data[order]).pow(2).mean()
        loss.backward()
        opt.step()
        sched.step()
        counter.value += 1
        losses.append(float(loss.detach()))
        phase.save(step, done=step == STEPS, losses=losses)
        if step == stop:
            break
    return losses


def test_save_then_resume_equals_an_uninterrupted_run(tmp_path):
    whole = RunDir.create(tmp_path / "whole", "x: 1\n", {})
    objs = build(whole)
    reference = train(*objs)
    ref_weights = {k: v.clone() for k, v in objs[1].state_dict().items()}
    ref_next = torch.rand(3)  # the global generator after the loop

    cut = RunDir.create(tmp_path / "cut", "x: 1\n", {})
    first = train(*build(cut), stop=3)
    torch.manual_seed(123)  # a killed process: the next one starts from other generator states
    phase, model, opt, gen, py_rng, counter = build(cut, seed=99)  # and other initial weights
    assert phase.resume() and not phase.done and phase.step == 3
    assert counter.value == 3 and phase.data["losses"] == first
    rest = train(phase, model, opt, gen, py_rng, counter)
    assert first + rest == reference
    for k, v in model.state_dict().items():
        assert torch.equal(v, ref_weights[k]), k
    assert torch.equal(torch.rand(3), ref_next)


def test_a_finished_phase_keeps_only_what_it_needs_and_resumes_as_done(tmp_path):
    run = RunDir.create(tmp_path / "run", "x: 1\n", {})
    train(*build(run))
    state = run.load_checkpoint("toy")["state"]
    assert state["done"] is True and {"model", "counter", "rng", "elapsed", "losses"} <= set(state)
    assert "optimizer" not in state and "generator" not in state
    phase, model, *_ , counter = build(run, seed=5)
    assert phase.resume() and phase.done and counter.value == STEPS
    assert list(phase.steps(STEPS)) == []


def test_elapsed_adds_up_over_resumes_and_starts_from_the_given_total(tmp_path):
    run = RunDir.create(tmp_path / "run", "x: 1\n", {})
    phase = ResumablePhase(run, "t", elapsed=5.0)
    assert phase.elapsed == 5.0
    list(phase.steps(1))
    phase.save(1)
    saved = run.load_checkpoint("t")["state"]["elapsed"]
    assert saved >= 5.0
    again = ResumablePhase(run, "t", elapsed=100.0)
    assert again.resume() and again.elapsed == saved  # the checkpoint's total, not the caller's


def test_setting_elapsed_while_the_clock_runs_restarts_it_from_the_new_total():
    phase = ResumablePhase(None, "t")
    phase.start()
    phase.elapsed = 50.0
    assert 50.0 <= phase.elapsed < 60.0


def test_custom_keys_and_a_merged_slot_keep_an_existing_layout(tmp_path):
    run = RunDir.create(tmp_path / "run", "x: 1\n", {})
    box = {"x": torch.ones(2), "iteration": 3}
    phase = ResumablePhase(run, "bo", {"state": Slot(lambda: dict(box), box.update, merge=True)}, rng=False,
                           elapsed_key="seconds", done_key="finished")
    phase.save(3, done=True)
    state = run.load_checkpoint("bo")["state"]
    assert set(state) == {"x", "iteration", "seconds", "finished"}
    box.clear()
    again = ResumablePhase(run, "bo", {"state": Slot(lambda: dict(box), box.update, merge=True)}, rng=False,
                           elapsed_key="seconds", done_key="finished")
    assert again.resume() and again.done and box["iteration"] == 3


def test_a_state_that_does_not_fit_is_a_one_line_checkpoint_error(tmp_path):
    run = RunDir.create(tmp_path / "run", "x: 1\n", {})
    ResumablePhase(run, "t", {"model": nn.Linear(2, 2)}).save(1)
    phase = ResumablePhase(run, "t", {"model": nn.Linear(3, 2)})
    with pytest.raises(CheckpointError, match="'model' does not fit this run .*size mismatch") as err:
        phase.resume()
    assert "\n" not in str(err.value)


def test_without_a_run_directory_nothing_is_saved_or_resumed():
    phase = ResumablePhase(None, "t", {"model": nn.Linear(2, 2)})
    assert not phase.resume()
    assert list(phase.steps(2)) == [1, 2]
    phase.save(2, done=True)
    assert phase.step == 2 and phase.done
