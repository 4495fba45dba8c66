"""Run directories: atomic files, checksummed checkpoints, event rewind, locking."""

from __future__ import annotations

import os

import pytest
import torch

from attnas.core.errors import CheckpointError, RunDirError
from attnas.runs.checkpoint_files import load_checkpoint_file, save_checkpoint_file
from attnas.runs.run_dir import RunDir


def test_checkpoint_round_trip_and_corruption(tmp_path):
    p = tmp_path / "a.ckpt"
    save_checkpoint_file(p, {"w": torch.arange(5.0), "n": 3}, events_offset=17)
    assert torch.equal(load_checkpoint_file(p)["w"], torch.arange(5.0))
    raw = p.read_bytes()
    p.write_bytes(raw[:-10])  # truncated
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint_file(p)
    p.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))  # one flipped bit
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        load_checkpoint_file(p)
    p.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="bad header"):
        load_checkpoint_file(p)


def test_checkpoints_refuse_code(tmp_path):
    """weights_only loading: a checkpoint holding an arbitrary object is rejected, not executed."""
    import hashlib
    import io

    buf = io.BytesIO()
    torch.save({"x": EvilPayload()}, buf)
    payload = buf.getvalue()
    p = tmp_path / "evil.ckpt"
    p.write_bytes(b"ATTNAS-CKPT-1 " + hashlib.sha256(payload).hexdigest().encode() + b" 0\n" + payload)
    with pytest.raises(CheckpointError, match="could not be loaded"):
        load_checkpoint_file(p)


class EvilPayload:
    """A class a weights-only load must refuse to construct."""


def test_run_dir_fallback_keep_and_rewind(tmp_path):
    run = RunDir.create(tmp_path / "run", "name: x\n", {})
    run.log({"phase": "a", "i": 1})
    run.save_checkpoint("s", 1, {"v": 1})
    run.log({"phase": "a", "i": 2})
    run.save_checkpoint("s", 2, {"v": 2})
    run.log({"phase": "a", "i": 3})
    run.save_checkpoint("s", 3, {"v": 3})
    run.log({"phase": "a", "i": 4})
    names = sorted(p.name for p in run.checkpoint_dir.iterdir())
    assert names == ["s-00000002.ckpt", "s-00000003.ckpt"]  # newest two kept
    newest = run.checkpoint_dir / "s-00000003.ckpt"
    newest.write_bytes(newest.read_bytes()[:-5])
    with pytest.warns(UserWarning, match="falling back"):
        ck = run.load_checkpoint("s")
    assert ck["step"] == 2 and ck["state"]["v"] == 2
    run.rewind_events()  # back to the newest good checkpoint: events 1 and 2 stay
    assert [e["i"] for e in run.events()] == [1, 2]
    run.close()


def test_create_refuses_existing_run_and_locks(tmp_path):
    run = RunDir.create(tmp_path / "run", "name: x\n", {})
    with pytest.raises(RunDirError, match="already holds a run"):
        RunDir.create(tmp_path / "run", "name: y\n", {})
    other = RunDir.open(tmp_path / "run")
    with pytest.raises(RunDirError, match="in use by another attnas process"):
        other.lock()
    run.close()
    other.lock()
    other.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_dir(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    with pytest.raises(RunDirError, match="not writable"):
        RunDir.check_writable(ro / "run")


def test_unwritable_path_under_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(RunDirError, match="not writable"):
        RunDir.check_writable(f / "run")


def test_create_refuses_a_non_empty_folder_that_is_not_a_run(tmp_path):
    """A stale metrics.json in a reused folder would mark the new run finished: the folder is refused."""
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "metrics.json").write_text('{"val_accuracy": 1.0}\n')
    with pytest.raises(RunDirError, match="is not empty and holds no attnas run"):
        RunDir.create(folder, "name: x\n", {})
    assert sorted(p.name for p in folder.iterdir()) == ["metrics.json"]
    empty = tmp_path / "empty"
    empty.mkdir()
    RunDir.create(empty, "name: x\n", {}).close()  # an empty folder is fine
    assert (empty / "config.yaml").exists()


def _quick_recipe(tmp_path, name):
    import yaml

    recipe = {"name": name, "task": {"name": "node-classification", "dataset": "digits-graph"},
              "space": {"name": "gnn-baseline"}, "strategy": {"name": "fixed", "arch": {"model": "gcn"}},
              "retrain": {"epochs": 1, "patience": 0}}
    p = tmp_path / "recipe.yaml"
    p.write_text(yaml.safe_dump(recipe))
    return p


def test_search_into_a_folder_with_other_files_fails_before_work(tmp_path):
    from typer.testing import CliRunner

    from attnas.cli import app

    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "metrics.json").write_text('{"val_accuracy": 1.0}\n')
    r = CliRunner().invoke(app, ["search", str(_quick_recipe(tmp_path, "x")), "--out", str(folder)])
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "is not empty and holds no attnas run" in lines[0], r.output
    assert sorted(p.name for p in folder.iterdir()) == ["metrics.json"]


@pytest.mark.parametrize("name,folder", [
    ("../../escaped", "escaped"),
    ("{tmp}/abs", "{flat}-abs"),  # an absolute path: joined to runs/ it would replace it
    ("..", "run"),
])
def test_default_run_folder_stays_under_runs(tmp_path, monkeypatch, name, folder):
    """A recipe name with path parts cannot place the default run folder outside ``runs/``."""
    from typer.testing import CliRunner

    from attnas.cli import app

    name = name.format(tmp=tmp_path)
    folder = folder.format(flat=str(tmp_path).strip("/").replace("/", "-"))
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    recipe = _quick_recipe(tmp_path, name)
    monkeypatch.chdir(work)
    r = CliRunner().invoke(app, ["search", str(recipe)])
    assert r.exit_code == 0, r.output
    [run] = list((work / "runs").iterdir())
    assert run.name.startswith(f"{folder}-") and (run / "metrics.json").exists()
    assert sorted(p.name for p in work.iterdir()) == ["runs"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "recipe.yaml"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b"]
    assert RunDir.open(run).read_config_yaml()["name"] == name  # the config keeps the name as given


def test_a_failed_atomic_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    import errno
    from pathlib import Path

    from attnas.runs.atomic_files import atomic_write_bytes, atomic_write_file

    target = tmp_path / "metrics.json"
    atomic_write_bytes(target, b"old")

    def disk_full(self, data):
        with open(self, "wb") as fh:
            fh.write(data[:2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", disk_full)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_bytes(target, b"new contents")
    monkeypatch.undo()
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]

    seen = []
    atomic_write_file(tmp_path / "figure.png", lambda tmp: (seen.append(tmp.name), tmp.write_bytes(b"png")))
    assert seen[0].startswith(".figure.tmp-") and seen[0].endswith(".png")  # a writer may pick the format from it
    assert (tmp_path / "figure.png").read_bytes() == b"png"
