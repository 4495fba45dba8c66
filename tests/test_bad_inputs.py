"""Bad inputs through the real entry points: each is a one-line error naming the problem
(exit status 2) and nothing is written to the run directory.

Covers recipes (malformed YAML, unknown keys, wrong types, values out of range, NaN and
infinite numbers, bytes that are not UTF-8), strategies given a space, task or file they
cannot use, architecture files (unknown
operations, out-of-range source layers, violated constraints), datasets (a graph file, a
CSV text file, SST trees, CIFAR-10 batches and an image folder with mismatched shapes, NaN
values or labels out of range) and checkpoints holding pickled objects.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import pathlib

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from attnas import pipeline
from attnas.cli import app
from attnas.core.errors import CheckpointError

runner = CliRunner()


@pytest.fixture
def recipe(tiny_recipe_data):
    return copy.deepcopy(tiny_recipe_data)


def fails_cleanly(tmp_path, args, message, out=None):
    """Run the CLI; expect exit 2, one line naming the problem, and no run directory."""
    out = out or tmp_path / "run"
    r = runner.invoke(app, [*args, "--out", str(out)] if args[0] == "search" else args)
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 2, r.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.output
    assert not out.exists(), f"{out} was written"


def write_recipe(tmp_path, data) -> str:
    p = tmp_path / "recipe.yaml"
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(p)


def set_key(data, dotted, value):
    node = data
    *parents, last = dotted.split(".")
    for k in parents:
        node = node.setdefault(k, {})
    node[last] = value
    return data


# --------------------------------------------------------------------------- recipes


@pytest.mark.parametrize("key,value,message", [
    ("space.hiden", 8, "space.hiden: unknown key (did you mean 'hidden'?)"),
    ("strategi", {}, "strategi: unknown key (did you mean 'strategy'?)"),
    ("strategy.evolution.rounds_", 2, "strategy.evolution.rounds_: unknown key (did you mean 'rounds'?)"),
    ("space.hidden", "abc", "space.hidden: expected an integer, got 'abc'"),
    ("strategy.supernet.epochs", 1.5, "strategy.supernet.epochs: expected an integer, got 1.5"),
    ("space.dropout", True, "space.dropout: expected a number, got True"),
    ("space.ops", "gcn", "space.ops: expected list of str"),
    ("retrain.optimizer", "rmsprop", "retrain.optimizer: 'rmsprop' is not a valid choice"),
    ("space.name", "autoatend", "unknown space 'autoatend' (did you mean 'autoattend'?)"),
    ("space.name", ["autoattend"], "space.name: expected a string"),
    ("retrain.epochs", 0, "epochs: must be >= 1"),
    ("space.ops", ["gcn", "gcnn"], "gcnn"),
    ("retrain.lr", float("nan"), "retrain.lr: must be a finite number, got nan"),
    ("retrain.weight_decay", float("inf"), "retrain.weight_decay: must be a finite number, got inf"),
    ("space.options", {"max_len": [8, float("-inf")]}, "space.options.max_len[1]: must be a finite number"),
    ("strategy.supernet.checkpoint_every", 0, "strategy.supernet.checkpoint_every: must be >= 1, got 0"),
    ("strategy.evolution.parents", 0, "strategy.evolution.parents: must be >= 1, got 0"),
    ("strategy.evolution.population", 0, "strategy.evolution.population: must be >= 1, got 0"),
    ("space.heads", 0, "space.heads: must be >= 1, got 0"),
    ("space.dropout", 1.0, "space.dropout: must be in [0, 1), got 1.0"),
    ("strategy.supernet.context_warmup", -0.5, "strategy.supernet.context_warmup: must be in [0, 1), got -0.5"),
    ("strategy.supernet.average", 1.5, "strategy.supernet.average: must be in [0, 1), got 1.5"),
    ("retrain.patience", -1, "retrain.patience: must be >= 0, got -1"),
    ("strategy.rerank.top_k", -1, "strategy.rerank.top_k: must be >= 0, got -1"),
    ("retrain.lr", 0, "retrain.lr: must be > 0, got 0.0"),
    ("seed", -1, "seed: must be in [0, "),
    ("strategy.score_threads", 0, "strategy.score_threads: must be >= 1, got 0"),
])
def test_bad_recipe_values(recipe, tmp_path, key, value, message):
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, set_key(recipe, key, value))], message)


@pytest.mark.parametrize("override,message", [
    ("retrain.lr=.nan", "retrain.lr: must be a finite number, got nan"),
    ("retrain.lr=-.inf", "retrain.lr: must be a finite number, got -inf"),
    ("strategy.supernet.checkpoint_every=0", "strategy.supernet.checkpoint_every: must be >= 1, got 0"),
    ("strategy.evolution.parents=0", "strategy.evolution.parents: must be >= 1, got 0"),
    ("strategy.evolution.checkpoint_every=0", "strategy.evolution.checkpoint_every: must be >= 1, got 0"),
])
def test_bad_set_overrides(recipe, tmp_path, override, message):
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe), "--set", override], message)


def test_bad_seed_option(recipe, tmp_path):
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe), "--seed", "-3"], "seed: must be in [0, ")


@pytest.mark.parametrize("text,message", [
    ("name: x\ntask: {name: node-classification\nspace: 3\n", "malformed YAML at line"),
    ("name: x\n  task: 1\n bad indent: [\n", "malformed YAML at line"),
    ("- a\n- b\n", "a recipe must be a YAML mapping"),
    ("name: x\ntask: {name: node-classification}\nspace: {name: autoattend}\n", "strategy: required key is missing"),
    (b"name: caf\xe9\ntask: {name: node-classification}\n", "not a UTF-8 text file (byte 0xe9 at offset 9)"),
])
def test_malformed_recipe_files(tmp_path, text, message):
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, text)], message)


# --------------------------------------------------------------------------- architectures


def add(src0, src1, op0="gcn", op1="gcn"):
    return {"type": "add", "inputs": [{"source": src0, "op": op0}, {"source": src1, "op": op1}]}


def attn(q, k, v, ops=("gcn", "gcn", "gcn")):
    return {"type": "attn", "inputs": [{"source": s, "op": o} for s, o in zip((q, k, v), ops)]}


@pytest.mark.parametrize("layers,message", [
    ([add(0, 0), add(1, 0, op1="gcnn")], "layer 2 input 2: unknown operation 'gcnn' (did you mean 'gcn'?)"),
    ([add(0, 0), add(1, 5)], "layer 2 input 2: source layer 5 out of range 0..1"),
    ([add(0, 0), add(1, -1)], "source layer -1 out of range 0..1"),
    ([add(0, 0), add(0, 1)], "constraint 1 requires the skeleton source to be layer 1, got 0"),
    ([add(0, 0), attn(1, 0, 1)], "constraint 2 requires Key and Value to share their source layer (got 0 and 1)"),
    ([add(0, 0), attn(1, 0, 0, ops=("gcn", "zero", "gcn"))], "constraint 3 forbids the zero operation here"),
    ([add(0, 0, op0="zero")], "expected 2 layers, got 1"),
    ([add(0, 0), {"type": "mul", "inputs": []}], "unknown layer type 'mul'"),
])
def test_bad_architecture_files(recipe, tmp_path, layers, message):
    arch = tmp_path / "arch.json"
    arch.write_text(json.dumps({"space": "autoattend", "version": 1, "choices": {"layers": layers}}))
    fails_cleanly(tmp_path, ["check-arch", str(arch), write_recipe(tmp_path, recipe)], message)
    # the same file given to a search (strategy fixed) is refused before anything is written
    recipe["strategy"] = {"name": "fixed", "arch_file": str(arch)}
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe)], message)


@pytest.mark.parametrize("text,message", [
    ('{"space": "autoattend", "choices": {"layers": [}', "malformed JSON at line 1"),
    ('{"space": "autoattend", "choices": {}, "colour": 1}', "unknown key 'colour'"),
    ('{"space": "hoga", "choices": {"layers": []}}', "architecture is for space 'hoga', not 'autoattend'"),
    ('{"space": "autoattend", "choices": {"layers": [NaN]}}', "JSON numbers are finite"),
])
def test_malformed_architecture_documents(recipe, tmp_path, text, message):
    arch = tmp_path / "arch.json"
    arch.write_text(text)
    fails_cleanly(tmp_path, ["check-arch", str(arch), write_recipe(tmp_path, recipe)], message)


# --------------------------------------------------------------------------- datasets


def graph(n=30, **change):
    g = torch.Generator().manual_seed(0)
    d = {"x": torch.rand(n, 4, generator=g), "edge_index": torch.randint(0, n, (2, 60), generator=g),
         "y": torch.arange(n) % 3}
    m = torch.zeros(n, dtype=torch.bool)
    d["train_mask"], d["val_mask"], d["test_mask"] = m.clone(), m.clone(), m.clone()
    d["train_mask"][:10], d["val_mask"][10:20], d["test_mask"][20:] = True, True, True
    d.update(change)
    return d


def nan_x():
    x = torch.rand(30, 4, generator=torch.Generator().manual_seed(0))
    x[7, 2] = float("nan")
    return x


@pytest.mark.parametrize("change,message", [
    ({"y": torch.arange(29) % 3}, "y has 29 rows but x has 30 nodes"),
    ({"x": nan_x()}, "x has NaN or infinite values in 1 nodes (first: node 7)"),
    ({"y": torch.arange(30) % 3 - 1}, "labels out of range: found -1..1"),
    ({"edge_index": torch.tensor([[0, 40], [1, 2]])}, "edge_index refers to node 40, but the graph has 30 nodes"),
    ({"train_mask": torch.ones(30, dtype=torch.bool)}, "train_mask and test_mask overlap"),
])
def test_bad_graph_files(recipe, tmp_path, change, message):
    p = tmp_path / "g.pt"
    torch.save(graph(**change), p)
    recipe["task"] = {"name": "node-classification", "dataset": "graph-file", "path": str(p)}
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe)], message)


def csv_rows(n=12):
    return [["text", "label"]] + [[f"review number {i}", "ab"[i % 2]] for i in range(n)]


@pytest.mark.parametrize("edit,options,message", [
    (lambda rows: rows[3].__setitem__(1, "c"), {"labels": ["a", "b"]}, "line 4: unknown label 'c'"),
    (lambda rows: rows[5].__setitem__(0, " "), {}, "line 6: empty text in column 'text'"),
    (lambda rows: rows.__setitem__(2, ["only text"]), {}, "line 3: 1 fields, the header has 2"),
    (lambda rows: rows[0].__setitem__(0, "review"), {}, "no column 'text'"),
])
def test_bad_csv_text_files(recipe, tmp_path, edit, options, message):
    rows = csv_rows()
    edit(rows)
    p = tmp_path / "d.csv"
    p.write_text("\n".join(",".join(r) for r in rows) + "\n")
    recipe["task"] = {"name": "text-classification", "dataset": "csv", "glove": "none",
                      "csv": {"path": str(p), **options}}
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe)], message)


def test_space_without_networks_for_the_task(recipe, tmp_path):
    """A task kind AutoAttend has no domain adapter for is refused before anything is written."""
    from attnas import registry
    from attnas.spaces.autoattend_networks import _ADAPTERS

    registry.discover()
    assert "image" not in _ADAPTERS  # AutoAttend has graph and text networks only
    recipe["task"] = {"name": "image-classification", "dataset": "digits"}
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe)],
                  "space 'autoattend' has no networks for 'image' tasks")


@pytest.mark.parametrize("space, strategy, message", [
    ({"name": "hoga", "width": 4, "groups": 2}, {"name": "darts", "epochs": 1},
     "space 'hoga' builds networks for 'image' tasks, not 'node'"),
    ({"name": "attention-mechanisms"}, {"name": "mechanism-search"},
     "space 'attention-mechanisms' builds networks for 'sequence' tasks, not 'node'"),
    ({"name": "text-transformer"}, {"name": "fixed", "arch": {"model": "transformer"}},
     "space 'text-transformer' builds networks for 'text' tasks, not 'node'"),
])
def test_space_for_another_kind_of_task(recipe, tmp_path, space, strategy, message):
    """Every single-domain space names the task kinds it builds networks for; nothing is written."""
    recipe["space"], recipe["strategy"] = space, strategy
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe)], message)


# --------------------------------------------------------------------------- strategies


TINY_LISTOPS = {
    "name": "tiny-listops",
    "task": {"name": "sequence-classification", "dataset": "listops",
             "listops": {"min_length": 5, "max_length": 24, "max_depth": 3, "max_args": 4, "train_size": 16,
                         "val_size": 8, "test_size": 8}},
    "space": {"name": "attention-mechanisms", "candidates": ["softmax"], "dim": 8, "depth": 1, "heads": 2},
    "strategy": {"name": "mechanism-search"},
}

TINY_DARTS = {
    "name": "tiny-darts",
    "task": {"name": "image-classification", "dataset": "digits", "train_subset": 40, "test_subset": 20,
             "val_fraction": 0.25},
    "space": {"name": "hoga", "width": 4, "groups": 2},
    "strategy": {"name": "darts", "epochs": 1},
}


def darts(task=None, **strategy):
    r = copy.deepcopy(TINY_DARTS)
    r["task"].update(task or {})
    r["strategy"].update(strategy)
    return r


def run_with_alpha(path, shape):
    """A run folder holding a 'darts' checkpoint with architecture weights of ``shape``."""
    from attnas.runs.run_dir import RunDir

    with RunDir.create(path, "name: other\n", {}) as run:
        run.save_checkpoint("darts", 1, {"alpha": [torch.zeros(shape)]})
    return str(path)


@pytest.mark.parametrize("make,message", [
    (lambda r, tmp: {**r, "strategy": {"name": "graph-vae"}},
     "strategy 'graph-vae' needs a table of architectures with scores (task 'architecture-performance')"),
    (lambda r, tmp: TINY_LISTOPS,
     "strategy 'mechanism-search': the space has 1 candidate mechanism(s), nothing to choose from"),
    (lambda r, tmp: darts(alpha_from=str(tmp / "nowhere")),
     "strategy.alpha_from: " ),
    (lambda r, tmp: darts(alpha_from=run_with_alpha(tmp / "other", (10, 9))),
     "strategy.alpha_from: alpha of"),
    (lambda r, tmp: darts(eval_split="tset"), "strategy.eval_split: unknown split 'tset'"),
    (lambda r, tmp: darts(splits=["train", "tset"]), "strategy.splits: unknown split 'tset'"),
    (lambda r, tmp: darts({"val_fraction": 0.0}, eval_split=""), "split 'val' is empty"),
    (lambda r, tmp: {**r, "space": {**r["space"], "layers": 1, "ops": ["zero", "gcn"]},
                     "strategy": {"name": "latent-bo", "initial": 5, "budget": 6, "vae": {"samples": 10}}},
     "strategy.initial: 5 initial architectures, but the 'autoattend' space has only 3"),
], ids=["graph-vae-on-nodes", "one-mechanism", "alpha-from-missing", "alpha-from-other-shapes",
        "unknown-eval-split", "unknown-bilevel-split", "empty-val-split", "latent-bo-initial-over-the-space"])
def test_strategy_refuses_inputs_before_writing(recipe, tmp_path, make, message):
    """Checks that need the strategy's options, the space or the loaded task run before the
    run directory exists, so the folder stays free for the corrected run."""
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, make(recipe, tmp_path))], message)


def test_text_task_with_a_graph_operation_pool(recipe, tmp_path):
    """AutoAttend's text networks need the text operation pool: refused before anything is written."""
    folder = tmp_path / "data" / "sst"
    folder.mkdir(parents=True)
    for name in ("train.txt", "dev.txt", "test.txt"):
        (folder / name).write_text("(3 (2 a) (4 b))\n(1 (1 c) (2 d))\n")
    recipe["task"] = {"name": "text-classification", "dataset": "sst5", "glove": "none"}
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe), "--data-dir", str(tmp_path / "data")],
                  "space.pool: text tasks need the 'text' operation pool, got 'pyg'")


def image_folder(root, shapes=((5, 6), (5, 6)), bad=None):
    from PIL import Image

    for c, shape in zip("ab", shapes):
        (root / c).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.full((*shape, 3), 40 * i, np.uint8), "RGB").save(root / c / f"{i}.png")
    if bad is not None:
        np.save(root / "a" / "bad.npy", bad)
    return root


@pytest.mark.parametrize("shapes,bad,message", [
    (((5, 6), (9, 9)), None, "is 9x9 but"),
    (((5, 6), (5, 6)), np.full((5, 6), np.nan, np.float32), "float images must hold values in [0, 1]"),
    (((5, 6), (5, 6)), np.full((5, 6), 3.0, np.float32), "float images must hold values in [0, 1]"),
    (((5, 6), (5, 6)), np.zeros((5, 6, 7), np.float32), "expected an (H, W), (H, W, C) or (C, H, W) array"),
])
def test_bad_image_folders(recipe, tmp_path, shapes, bad, message):
    folder = image_folder(tmp_path / "images", shapes, bad)
    recipe["task"] = {"name": "image-classification", "dataset": "image-folder", "path": str(folder)}
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe)], message)


def cifar_folder(root, edit=None):
    """A CIFAR-10 folder of 4 images per batch file; ``edit(name, batch)`` spoils one batch."""
    import pickle

    root.mkdir()
    rng = np.random.default_rng(0)
    for name in (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"):
        batch = {b"data": rng.integers(0, 256, (4, 3072), dtype=np.uint8), b"labels": [0, 3, 9, 1]}
        if edit is not None:
            edit(name, batch)
        with open(root / name, "wb") as f:
            pickle.dump(batch, f, protocol=2)
    return root


def _in(name, key, value):
    return lambda n, batch: batch.__setitem__(key, value) if n == name else None


@pytest.mark.parametrize("edit,message", [
    (_in("data_batch_3", b"labels", [0, 10, 2, 1]), "data_batch_3: label 10 out of range 0..9"),
    (_in("test_batch", b"labels", [0, -1, 2, 1]), "test_batch: label -1 out of range 0..9"),
    (_in("data_batch_2", b"labels", [0, 1, 2]), "data_batch_2: 4 images but 3 labels"),
    (_in("data_batch_5", b"data", np.zeros((4, 3000), np.uint8)), "'data' must have shape (N, 3072), got (4, 3000)"),
    (_in("data_batch_1", b"data", np.full((4, 3072), np.nan)), "'data' must hold bytes 0..255, got dtype float64"),
], ids=["label-too-large", "negative-label", "labels-missing", "image-shape", "nan-pixels"])
def test_bad_cifar10_batches(recipe, tmp_path, edit, message):
    folder = cifar_folder(tmp_path / "cifar", edit)
    recipe["task"] = {"name": "image-classification", "dataset": "cifar10", "path": str(folder)}
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe)], message)


@pytest.mark.parametrize("dev,message", [
    ("(7 (2 a) (2 b))\n", "dev.txt:1: sentiment label 7 is outside 0..4"),
    ("(3 (2 a) (4 b))\n(2 (2 c)\n", "dev.txt:2: unbalanced '('"),
], ids=["label-out-of-range", "unclosed-tree"])
def test_bad_sst_trees(recipe, tmp_path, dev, message):
    folder = tmp_path / "data" / "sst"
    folder.mkdir(parents=True)
    for name in ("train.txt", "test.txt"):
        (folder / name).write_text("(3 (2 a) (4 b))\n(1 (1 c) (2 d))\n")
    (folder / "dev.txt").write_text(dev)
    recipe["task"] = {"name": "text-classification", "dataset": "sst5", "glove": "none"}
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe), "--data-dir", str(tmp_path / "data")], message)


# --------------------------------------------------------------------------- checkpoints


class Marker:
    """Unpickling this would create a file: proof of code execution if the file appears."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def test_model_file_with_a_pickled_object_is_refused(recipe, tmp_path):
    recipe["space"] = {"name": "gnn-baseline"}
    recipe["strategy"] = {"name": "fixed", "arch": {"model": "gcn"}}
    recipe["retrain"] = {"epochs": 1, "patience": 0}
    run = pipeline.search(recipe, out=tmp_path / "run")
    marker = tmp_path / "code-ran"
    buf = io.BytesIO()
    torch.save({"state_dict": Marker(marker), "config": {}, "arch": {}}, buf)
    payload = buf.getvalue()
    crafted = b"ATTNAS-CKPT-1 " + hashlib.sha256(payload).hexdigest().encode() + b" 0\n" + payload
    run.file("model.pt").write_bytes(crafted)  # a valid checksum: only weights_only loading stops it
    with pytest.raises(CheckpointError, match="model.pt could not be loaded"):
        pipeline.load_model(run.path)
    r = runner.invoke(app, ["evaluate", str(run.path)])
    assert r.exit_code == 2 and "could not be loaded" in r.output
    assert not marker.exists()
    torch.load(io.BytesIO(payload), weights_only=False)  # the file really is dangerous when unpickled
    assert marker.exists()


# --------------------------------------------------------------------------- command-line options


@pytest.mark.parametrize("options,message", [
    (["--device", "tpu"], "--device: 'tpu' is not a device (use auto, cpu or cuda)"),
    (["--workers", "0"], "--workers must be an integer >= 1, got 0"),
    (["--force"], "--force goes with --resume RUN_DIR"),
    (["--set", "space.hidden"], "--set 'space.hidden': expected key=value"),
    (["--set", "retrain.lr=[1"], "--set 'retrain.lr=[1': value is not valid YAML"),
    (["--set", "space.hidden.x=1"], "space.hidden is not a section"),
])
def test_bad_search_options(recipe, tmp_path, options, message):
    fails_cleanly(tmp_path, ["search", write_recipe(tmp_path, recipe), *options], message)


@pytest.mark.parametrize("args,message", [
    (["--threads", "0", "list"], "--threads must be >= 1, got 0"),
    (["retrain", "RUN", "--init", "bogus"], "--init must be supernet or scratch, got 'bogus'"),
    (["sweep", "RECIPE", "--seeds", "0"], "--seeds must be an integer >= 1, got 0"),
    (["search", "--resume", "RUN", "--seed", "3"], "--resume takes only the run directory"),
    (["search", "--resume", "NOWHERE"], "is not a run directory"),
])
def test_bad_command_options(recipe, tmp_path, args, message):
    names = {"RUN": str(tmp_path / "run"), "RECIPE": write_recipe(tmp_path, recipe), "NOWHERE": str(tmp_path / "x")}
    args = [names.get(a, a) for a in args]
    if args[0] == "search":  # fails_cleanly gives searches --out, which --resume refuses: call directly
        r = runner.invoke(app, args)
        lines = [line for line in r.output.splitlines() if line.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and message in lines[0], r.output
        assert not (tmp_path / "run").exists() and not (tmp_path / "x").exists()
    else:
        fails_cleanly(tmp_path, args, message)
