"""Inputs as users produce them: NumPy's default dtypes, YAML 1.2 numbers, duplicate keys,
alias bombs, huge numbers, other encodings, copied model files, SIGTERM.

Each bad input ends with exit status 2, one line naming the input and the problem, and
nothing written (no run folder; a run folder given is left byte for byte as it was); each
valid one succeeds. Everything runs in this process through the command line
(``CliRunner``), on graphs of 30 nodes.
"""

from __future__ import annotations

import codecs
import copy
import json
import os
import signal
import time

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from attnas import pipeline
from attnas.cli import app
from attnas.runs.run_dir import RunDir

runner = CliRunner()

FIXED = {"name": "fixed-gcn", "task": {"name": "node-classification", "dataset": "graph-file", "path": "GRAPH"},
         "space": {"name": "gnn-baseline", "gcn_hidden": 8},
         "strategy": {"name": "fixed", "arch": {"model": "gcn"}}, "retrain": {"epochs": 2, "patience": 0}}


def lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def graph(n: int = 30, **change) -> dict:
    g = torch.Generator().manual_seed(0)
    d = {"x": torch.rand(n, 4, generator=g), "edge_index": torch.randint(0, n, (2, 60), generator=g),
         "y": torch.arange(n) % 3}
    d.update(change)
    return d


def recipe_for(tmp_path, graph_obj=None, text: str | bytes | None = None, **change) -> str:
    """A recipe file training a GCN on a graph file holding ``graph_obj`` (or the raw ``text``)."""
    p = tmp_path / "recipe.yaml"
    if text is not None:
        (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
        return str(p)
    g = tmp_path / "g.pt"
    torch.save(graph() if graph_obj is None else graph_obj, g)
    data = copy.deepcopy(FIXED)
    data["task"]["path"] = str(g)
    data.update(change)
    p.write_text(yaml.safe_dump(data))
    return str(p)


def write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def snapshot(folder) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(args, message, tmp_path, untouched=None, seconds=None):
    """Exit 2, one line holding ``message``, no ``tmp_path/out`` and ``untouched`` unchanged."""
    out = tmp_path / "out"
    before = snapshot(untouched) if untouched is not None else None
    args = [*args, "--out", str(out)] if args[0] in ("search", "sweep") and "--resume" not in args else args
    t0 = time.perf_counter()
    r = runner.invoke(app, args)
    took = time.perf_counter() - t0
    assert r.exit_code == 2, r.output
    assert len(lines(r.output)) == 1 and lines(r.output)[0].startswith("error: "), r.output
    assert message in lines(r.output)[0], r.output
    assert not out.exists(), f"{out} was written"
    if untouched is not None:
        assert snapshot(untouched) == before, f"{untouched} was changed"
    if seconds is not None:
        assert took < seconds, f"took {took:.1f} s"
    return lines(r.output)[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished GCN run and a finished GAT run on the same graph (made once)."""
    tmp = tmp_path_factory.mktemp("runs")
    torch.save(graph(), tmp / "g.pt")
    runs = {}
    for model in ("gcn", "gat"):
        data = copy.deepcopy(FIXED)
        data["task"]["path"] = str(tmp / "g.pt")
        data["strategy"]["arch"]["model"] = model
        runs[model] = pipeline.search(data, out=tmp / model).path
    return runs


# --------------------------------------------------------------------------- ordinary data and numbers


@pytest.mark.parametrize("change, cast", [
    ({"x": torch.rand(30, 4, dtype=torch.float64)}, "cast x torch.float64 -> torch.float32"),
    ({"y": (torch.arange(30) % 3).int()}, "cast y torch.int32 -> torch.int64"),
], ids=["float64-features", "int32-labels"])
def test_numpy_default_dtypes_are_cast_and_said_once(tmp_path, recwarn, change, cast):
    r = runner.invoke(app, ["search", recipe_for(tmp_path, graph(**change)), "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    assert [str(w.message).split(": ", 1)[1] for w in recwarn if ": cast " in str(w.message)] == [cast]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "finished"


@pytest.mark.parametrize("value, shown", [("5e-3", "lr: 0.005"), ("1e4", "lr: 10000.0"), ("1.5E+2", "lr: 150.0")])
def test_yaml_1_2_numbers_are_numbers(tmp_path, value, shown):
    r = runner.invoke(app, ["show", recipe_for(tmp_path), "--set", f"retrain.lr={value}"])
    assert r.exit_code == 0, r.output
    assert shown in r.output
    r = runner.invoke(app, ["show", recipe_for(tmp_path, text=f"{yaml.safe_dump(FIXED)}seed: 1e1\n")])
    assert r.exit_code == 0 and "seed: 10" in r.output, r.output


def test_text_files_in_utf16_or_with_a_bom_are_read(tmp_path):
    arch = json.dumps({"space": "gnn-baseline", "version": 1, "choices": {"model": "gcn"}})
    recipe = recipe_for(tmp_path)
    for i, encoding in enumerate(("utf-16", "utf-8-sig", "utf-16-be")):  # the first two write their BOM
        p = tmp_path / f"arch{i}.json"
        p.write_bytes((codecs.BOM_UTF16_BE if encoding == "utf-16-be" else b"") + arch.encode(encoding))
        r = runner.invoke(app, ["check-arch", str(p), recipe])
        assert r.exit_code == 0 and r.output.startswith("ok: "), (encoding, r.output)
    from attnas.data.text_csv import CsvOptions, load_text_csv

    rows = "text,label\n" + "".join(f"review {i} caf\u00e9,{'ab'[i % 2]}\n" for i in range(12))
    for encoding in ("utf-16", "utf-8-sig"):
        (tmp_path / "d.csv").write_bytes(rows.encode(encoding))
        ds = load_text_csv(tmp_path, csv=CsvOptions(path=str(tmp_path / "d.csv")))
        texts = [t for split in ds.splits.values() for t in split.texts]
        assert ds.label_names == ("a", "b") and sorted(texts) == sorted(f"review {i} caf\u00e9" for i in range(12))


# --------------------------------------------------------------------------- refused: recipes and options


BOMB = "".join(f"{c}: &{c} [{', '.join([f'*{p}' if p else '1'] * 9)}]\n"
               for p, c in zip(["", *"abcdefgh"], "abcdefghi"))


@pytest.mark.parametrize("make, message", [
    (lambda t: ["show", recipe_for(t, text=yaml.safe_dump(FIXED) + "retrain: {epochs: 3}\n")],
     "duplicate key 'retrain' at line 16 (first at line 2); keep one"),
    (lambda t: ["show", recipe_for(t, text="description: x\n" + BOMB + yaml.safe_dump(FIXED))],
     "more than 1,000,000 values once its aliases are expanded"),
    (lambda t: ["show", recipe_for(t, text="name: " + "[" * 3000 + "]" * 3000 + "\n")],
     "nested more than 100 levels deep"),
    (lambda t: ["show", recipe_for(t, text="")], "the file is empty; a recipe is a YAML mapping"),
    (lambda t: ["show", recipe_for(t, text=f"{yaml.safe_dump(FIXED)}seed: 1{'0' * 5000}\n")],
     "an integer of 5001 digits; attnas reads integers of at most 100 digits"),
    (lambda t: ["show", recipe_for(t), "--set", "seed=1" + "0" * 5000], "--set seed: line 1: an integer of 5001 digits"),
    (lambda t: ["show", recipe_for(t), "--set", ".".join(["a"] * 3000) + "=1"],
     "--set a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a....: a key of 3000 parts; recipes nest at most 100 levels deep"),
    (lambda t: ["show", recipe_for(t), "--set", "retrain.epochs=1e30"],
     "retrain.epochs: an integer of 31 digits does not fit in 64 bits"),
    (lambda t: ["show", recipe_for(t, text=yaml.safe_dump(FIXED).encode("utf-16-le"))],
     "not a UTF-8 text file (NUL bytes from offset 1: UTF-16 without a byte-order mark?)"),
    (lambda t: ["check-arch", write(t / "a.json", '{"space": "gnn-baseline", "version": 1, "choices": '
                                                 '{"model": "gcn", "model": "gat"}}'), recipe_for(t)],
     "a.json: duplicate key 'model' in a JSON object; keep one"),
    (lambda t: ["search", recipe_for(t), "--set", "task.options.K=5"],
     "task.options.K: unknown option of dataset 'graph-file'"),
    (lambda t: ["search", recipe_for(t), "--device", "mps"], "--device mps: attnas runs on cpu or cuda, not mps"),
    (lambda t: ["search", recipe_for(t), "--device", "meta"], "--device meta: attnas runs on cpu or cuda, not meta"),
    (lambda t: ["search", recipe_for(t), "--set", "space.gcn_hidden=1000000000000"],
     "space: its network has"),
    (lambda t: ["sweep", recipe_for(t), "--seeds", str(10**12)],
     "--seeds 1000000000000: 1,000,000,000,000 runs, more than the 10,000 one command plans"),
    (lambda t: ["sweep", recipe_for(t), *[f"--grid=retrain.{k}=[{', '.join(map(str, range(1, 23)))}]"
                                          for k in ("epochs", "patience", "batch_size")]],
     "--grid: 10,648 runs, more than the 10,000 one command plans"),
    (lambda t: ["retrain", str(t / "no-run"), "--seeds", "0"], "--seeds must be an integer >= 1, got 0"),
    (lambda t: ["search", recipe_for(t), "--workers", str(10**12)],
     "--workers 1000000000000: at most 4,096 workers (each one a process)"),
    (lambda t: ["--threads", str(10**12), "show", recipe_for(t)], "--threads 1000000000000: at most 4,096 threads"),
], ids=["duplicate-key", "alias-bomb", "nested-3000-deep", "empty-recipe", "5000-digit-integer",
        "5000-digit-set", "set-key-3000-deep", "1e30-as-an-integer", "utf16-without-bom-recipe",
        "arch-json-duplicate-key", "unknown-loader-option",
        "device-mps", "device-meta", "width-10e12", "sweep-seeds-10e12", "grid-over-10000-runs",
        "retrain-seeds-0", "workers-10e12", "threads-10e12"])
def test_recipes_and_options_refused_before_anything_is_written(tmp_path, make, message):
    refused(make(tmp_path), message, tmp_path, seconds=10)


def test_an_unknown_autoattend_option_on_graphs_is_refused(tmp_path, tiny_recipe_data):
    tiny_recipe_data = copy.deepcopy(tiny_recipe_data)
    tiny_recipe_data["space"]["options"] = {"pooling": "max"}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(tiny_recipe_data))
    refused(["search", str(p)], "space.options.pooling: unknown option; AutoAttend's graph networks take no",
            tmp_path)


# --------------------------------------------------------------------------- refused: data files


def csv_recipe(tmp_path, content: bytes) -> str:
    (tmp_path / "d.csv").write_bytes(content)
    data = {"name": "csv", "task": {"name": "text-classification", "dataset": "csv", "glove": "none",
                                    "csv": {"path": str(tmp_path / "d.csv")}},
            "space": {"name": "text-transformer"}, "strategy": {"name": "fixed", "arch": {"model": "transformer"}}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(data))
    return str(tmp_path / "r.yaml")


ROWS = "text,label\n" + "".join(f"review number {i},{'ab'[i % 2]}\n" for i in range(12))


@pytest.mark.parametrize("make, message", [
    (lambda t: recipe_for(t, graph(y=torch.zeros(30, dtype=torch.long))),
     "the training nodes hold 1 class (0); a classifier needs at least two"),
    (lambda t: recipe_for(t, {0: torch.rand(30, 4), 1: torch.zeros(2, 0, dtype=torch.long)}),
     "holds a dict with the key 0; its keys must be the names x, edge_index, y"),
    (lambda t: recipe_for(t, graph(y=torch.tensor(1))), "y is a single number (a 0-d tensor)"),
    (lambda t: csv_recipe(t, ROWS.replace("number 3", "caf\u00e9").encode("latin-1")),
     "d.csv: not a UTF-8 text file (byte 0xe9 at offset 75); save it as UTF-8 (or UTF-16 with a byte-order mark)"),
    (lambda t: csv_recipe(t, ROWS.replace("number 3", "x" * 140_000).encode()),
     "d.csv, line 5: field larger than field limit (131072)"),
    (lambda t: csv_recipe(t, "".join(f"review {i},l{i}\n" for i in range(12)).replace("review 0,l0", "text,label")
                          .encode()),
     "no val rows can be held out of the training rows: 11 of 11 labels occur in one row only"),
], ids=["one-class", "integer-keys", "0-d-labels", "latin1-csv", "csv-field-140000", "csv-labels-once"])
def test_data_files_refused_before_anything_is_written(tmp_path, make, message):
    refused(["search", make(tmp_path)], message, tmp_path)


def test_an_image_decompression_bomb_is_refused(tmp_path, tiny_recipe_data, monkeypatch):
    tiny_recipe_data = copy.deepcopy(tiny_recipe_data)
    from PIL import Image

    for c in "ab":
        (tmp_path / "img" / c).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.full((5, 6, 3), 40 * i, np.uint8)).save(tmp_path / "img" / c / f"{i}.png")
    Image.new("1", (300, 300)).save(tmp_path / "img" / "a" / "bomb.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 40_000)  # Pillow's limit, lowered: the same check on a small file
    tiny_recipe_data["task"] = {"name": "image-classification", "dataset": "image-folder", "path": str(tmp_path / "img")}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(tiny_recipe_data))
    refused(["search", str(tmp_path / "r.yaml")], "bomb.png is larger than 40,000 pixels (Pillow's limit against "
            "decompression bombs)", tmp_path)


def test_an_infeasible_cost_constraint_is_refused_before_the_supernet_trains(tmp_path, tiny_recipe_data, monkeypatch):
    from attnas.strategies import one_shot_costs

    tiny_recipe_data = copy.deepcopy(tiny_recipe_data)
    monkeypatch.setattr(one_shot_costs, "FEASIBILITY_DRAWS", 8)
    tiny_recipe_data["strategy"]["constraints"] = {"params": 10}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(tiny_recipe_data))
    refused(["search", str(tmp_path / "r.yaml")], "strategy.constraints: only 0 of the 8 distinct architectures "
            "drawn meet params <= 10, 30 were needed (checked before training; the smallest drawn: params ", tmp_path)


# --------------------------------------------------------------------------- refused: run folders


def copy_run(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("spoil, args, message", [
    (lambda run, other: [(run / f).write_bytes((other / f).read_bytes()) for f in ("model.pt", "model.pt.sha256")],
     ["evaluate"], "model.pt is the model of another architecture than this run's arch.json (copied from another run?)"),
    (lambda run, other: (run / "model.pt").write_bytes((other / "model.pt").read_bytes()), ["evaluate"],
     "model.pt is corrupt or truncated, or not the file model.pt.sha256 was written for (copied from another run"),
    (lambda run, other: (run / "metrics.json").write_text("{\"val_accuracy\": 0.5"), ["search", "--resume"],
     "metrics.json is not valid JSON"),
    (lambda run, other: (run / "config.yaml").write_text(""), ["search", "--resume"],
     "config.yaml does not hold a run's config (a YAML mapping), it holds nothing"),
    (lambda run, other: (run / "config.yaml").write_text(yaml.safe_dump(FIXED) + "seed: 2\nseed: 3\n"),
     ["evaluate"], "config.yaml: duplicate key 'seed'"),
], ids=["model-of-another-run", "model-without-its-checksum", "corrupt-metrics", "empty-run-config", "run-config-duplicate-key"])
def test_spoilt_run_folders_are_refused_and_left_as_they_were(tmp_path, finished, spoil, args, message):
    run = copy_run(finished["gcn"], tmp_path / "run")
    spoil(run, finished["gat"])
    refused([*args, str(run)], message, tmp_path, untouched=run)


def test_a_model_of_another_width_is_refused(tmp_path, finished):
    run = copy_run(finished["gcn"], tmp_path / "run")
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["space"]["gcn_hidden"] = 16
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    refused(["evaluate", str(run)], "model.pt does not fit this run's network (copied from another run?)", tmp_path,
            untouched=run)


# --------------------------------------------------------------------------- signals


@pytest.fixture
def restore_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    # a command starts with Python's own handlers (another test of this process may have left
    # SIGINT ignored, and attnas keeps a signal the process was started ignoring ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def signal_during_final_training(monkeypatch, *signals, during_recording=()):
    """The final training receives ``signals`` (real ones, sent to this process), and
    ``during_recording`` arrive while the run records how it stopped."""

    def final(*args, **kwargs):
        monkeypatch.undo()
        if during_recording:
            original = RunDir.update_run_info

            def recording(self, **fields):
                for s in during_recording:
                    os.kill(os.getpid(), s)
                    time.sleep(0.01)
                original(self, **fields)

            monkeypatch.setattr(RunDir, "update_run_info", recording)
        for s in signals:
            os.kill(os.getpid(), s)
        # short sleeps: the kernel may hand the signal to another thread of this process (a
        # test's local Ray leaves some), and Python then runs its handler at the next bytecode
        # boundary of the main thread, not by interrupting one long sleep
        for _ in range(100):
            time.sleep(0.01)
        raise AssertionError("the signal did not stop the training")

    monkeypatch.setattr(pipeline, "train_final", final)


@pytest.mark.parametrize("signals, during, code, first", [
    ((signal.SIGTERM,), (), 143, "error: terminated (SIGTERM); the run is kept"),
    ((signal.SIGINT,), (signal.SIGINT,), 130, "error: interrupted; the run is kept"),
    ((signal.SIGTERM,), (signal.SIGINT, signal.SIGTERM), 143, "error: terminated (SIGTERM); the run is kept"),
], ids=["sigterm", "second-ctrl-c-while-recording", "ctrl-c-and-sigterm-while-recording"])
def test_sigterm_stops_like_ctrl_c_and_a_second_signal_is_ignored(tmp_path, monkeypatch, restore_signals, signals,
                                                                 during, code, first):
    out = tmp_path / "run"
    signal_during_final_training(monkeypatch, *signals, during_recording=during)
    r = runner.invoke(app, ["search", recipe_for(tmp_path), "--out", str(out)])
    assert r.exit_code == code, r.output
    assert lines(r.output) == [f"{first}: `attnas search --resume {out.resolve()}` continues it"], r.output
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    monkeypatch.undo()
    r = runner.invoke(app, ["search", "--resume", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads((out / "run.json").read_text())["status"] == "finished"
