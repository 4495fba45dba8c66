"""Faults during a real search: corrupt or crafted checkpoints on resume, unwritable run
directories.

SIGKILL during supernet training and during evolution: ``tests/test_resume.py``; during a
DARTS epoch: ``tests/strategies/test_darts_resume.py``; a killed Ray worker and a resume on
other workers: ``tests/scale/test_parallel.py``.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import pathlib
import signal

import pytest
import torch
import yaml

from attnas import pipeline
from attnas.core.errors import RunDirError
from attnas.training import retraining
from attnas_subprocess import run_attnas

TIMING = {"search_seconds"}


def attnas(*args, fault=None, check=True):
    return run_attnas(*args, fault=fault, check=check, threads=torch.get_num_threads())


@pytest.fixture(scope="module")
def recipe_file(tmp_path_factory, tiny_recipe_data):
    r = copy.deepcopy(tiny_recipe_data)
    r["strategy"] = {"name": "one-shot-evolution", "supernet": {"epochs": 12, "checkpoint_every": 4},
                     "evolution": {"population": 8, "parents": 2, "children": 2, "rounds": 1, "checkpoint_every": 4},
                     "rerank": {"top_k": 2, "epochs": 1}}
    r["retrain"] = {"epochs": 2, "patience": 0, "init": "supernet"}
    p = tmp_path_factory.mktemp("recipe") / "r.yaml"
    p.write_text(yaml.safe_dump(r))
    return p


@pytest.fixture(scope="module")
def reference(recipe_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "run"
    pipeline.search(recipe_file, out=out)  # in this process, on the threads the killed child is given
    return out


@pytest.fixture(scope="module")
def killed_run(recipe_file, tmp_path_factory):
    """A search SIGKILLed at supernet epoch 10 (checkpoints at epochs 4 and 8)."""
    out = tmp_path_factory.mktemp("killed") / "run"
    killed = attnas("search", str(recipe_file), "--out", str(out), fault="supernet:10", check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    return out


class Marker:
    """Unpickling this would create a file: proof of code execution if the file appears."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def crafted_checkpoint(path, marker):
    """A checkpoint with a valid header and checksum whose payload pickles an object."""
    buf = io.BytesIO()
    torch.save({"step": 8, "state": {"model": Marker(marker)}}, buf)
    payload = buf.getvalue()
    path.write_bytes(b"ATTNAS-CKPT-1 " + hashlib.sha256(payload).hexdigest().encode() + b" 0\n" + payload)


def truncate(p, marker):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def flip_a_bit(p, marker):
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    p.write_bytes(bytes(raw))


def craft(p, marker):
    crafted_checkpoint(p, marker)


@pytest.mark.parametrize("damage,why", [(truncate, "corrupt or truncated"), (flip_a_bit, "checksum mismatch"),
                                        (craft, "could not be loaded")], ids=["truncated", "bit-flip", "pickled-code"])
def test_damaged_newest_checkpoint_falls_back_to_the_previous_one(killed_run, reference, tmp_path, damage, why):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(killed_run, out)
    ckpts = sorted(p.name for p in (out / "checkpoints").glob("supernet-*.ckpt"))
    assert ckpts == ["supernet-00000004.ckpt", "supernet-00000008.ckpt"]
    marker = tmp_path / "code-ran"
    damage(out / "checkpoints" / "supernet-00000008.ckpt", marker)
    with pytest.warns(UserWarning, match="falling back to the previous checkpoint") as caught:
        pipeline.resume(out)  # in this process: a subprocess would add seconds of start-up per case
    message = " ".join(str(w.message) for w in caught)
    assert "supernet-00000008.ckpt" in message and why in message, message
    assert not marker.exists()  # the pickled object was never constructed
    # the search went on from epoch 4 and ended as the uninterrupted one
    assert json.loads((out / "arch.json").read_text()) == json.loads((reference / "arch.json").read_text())
    m, ref = (json.loads((p / "metrics.json").read_text()) for p in (out, reference))
    assert {k: v for k, v in m.items() if k not in TIMING} == {k: v for k, v in ref.items() if k not in TIMING}
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in events if e["phase"] == "supernet"] == list(range(1, 13))


def _no_work(*args, **kwargs):
    raise AssertionError("work started before the run directory was checked")


def _cannot_write_in(folder: str) -> bool:
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(dir=folder))
        return False
    except OSError:
        return True


def unwritable_targets(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    targets = [("under a file", f / "run")]
    if os.path.isdir("/sys") and _cannot_write_in("/sys"):  # sysfs: even root cannot make folders there
        targets.append(("read-only file system", pathlib.Path("/sys/attnas-run")))
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        targets.append(("no write permission", ro / "run"))
    return targets


def test_unwritable_run_directory_fails_before_any_work(recipe_file, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "build_task", _no_work)
    monkeypatch.setattr(pipeline, "build_space", _no_work)
    from attnas.scale import sweep

    monkeypatch.setattr(sweep, "build_task", _no_work)

    for what, target in unwritable_targets(tmp_path):
        with pytest.raises(RunDirError, match="is not writable") as err:
            pipeline.search(recipe_file, out=target)
        assert str(target) in str(err.value), what
        with pytest.raises(RunDirError, match="is not writable"):
            sweep.sweep(recipe_file, seeds=2, out=target)
        assert not target.exists()
    from typer.testing import CliRunner

    from attnas.cli import app

    r = CliRunner().invoke(app, ["search", str(recipe_file), "--out", str(tmp_path / "a-file" / "run")])
    assert r.exit_code == 2 and r.output.startswith("error: run directory") and "not writable" in r.output, r.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to read-only folders")
def test_resume_and_retrain_of_a_read_only_run_fail_before_any_work(reference, tmp_path, monkeypatch):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(reference, run)
    for p in [run, *run.rglob("*")]:
        p.chmod(0o500 if p.is_dir() else 0o400)
    monkeypatch.setattr(pipeline, "build_task", _no_work)
    monkeypatch.setattr(retraining, "build_task", _no_work)
    try:
        with pytest.raises(RunDirError, match="is not writable"):
            pipeline.resume(run)
        with pytest.raises(RunDirError, match="is not writable"):
            retraining.retrain(run, seeds=2)
    finally:
        for p in [run, *run.rglob("*")]:
            p.chmod(0o700)
