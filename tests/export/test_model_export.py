"""A found model leaves attnas: model.pt read by plain torch, load_model without data, and
``attnas export --format`` (state_dict, safetensors, torch.export, ONNX), each export run
against the original model on the same input. One tiny AutoAttend run serves every test."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import io
import json
import pathlib
import shutil

import pytest
import torch
from typer.testing import CliRunner

from attnas import pipeline
from attnas.cli import app
from attnas.core.errors import CheckpointError, RunDirError
from attnas.export.model_export import run_with_torch_alone
from attnas.export.model_inputs import example_inputs, tensor_input_model
from attnas.runs.checkpoint_files import save_checkpoint_file
from attnas.tasks.base import TaskInfo

runner = CliRunner()


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_recipe_data):
    """A finished seconds-long AutoAttend run on the digits graph (data bundled with scikit-learn)."""
    recipe = copy.deepcopy(tiny_recipe_data)
    recipe["strategy"]["supernet"]["epochs"] = 3
    recipe["strategy"]["evolution"] = {"population": 4, "parents": 2, "children": 2, "rounds": 1}
    recipe["strategy"]["rerank"] = {"top_k": 1, "epochs": 1}
    recipe["retrain"]["epochs"] = 2
    return pipeline.search(recipe, out=tmp_path_factory.mktemp("export") / "run").path


@pytest.fixture(scope="module")
def reference(run):
    """The run's model rebuilt on its task (with the data) and a real batch of that task."""
    _, config, _, _ = pipeline.open_finished(run)
    task = pipeline.run_task(pipeline.RunDir(run), config, device="cpu")
    return pipeline.load_model(run, device="cpu"), next(task.batches("test")), task


def _outputs(model, batch):
    with torch.no_grad():
        return model(batch)


def test_model_pt_is_plain_torch_with_its_checksum_beside_it(run):
    data = (run / "model.pt").read_bytes()
    payload = torch.load(run / "model.pt", weights_only=True)
    assert payload["format"] == "attnas-model" and payload["task_info"]["kind"] == "node"
    assert payload["task_info"]["in_dim"] == 64 and payload["task_info"]["num_classes"] == 10
    assert all(isinstance(v, torch.Tensor) for v in payload["state_dict"].values())
    assert (run / "model.pt.sha256").read_text().split() == [hashlib.sha256(data).hexdigest(), "model.pt"]


def test_load_model_needs_no_data(run, reference, tmp_path, monkeypatch):
    model, batch, task = reference
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("model.pt", "model.pt.sha256"):
        shutil.copy(run / name, elsewhere / name)
    monkeypatch.setenv("ATTNAS_DATA", str(tmp_path / "no-data"))

    def no_task(*args, **kwargs):
        raise AssertionError("load_model built the task (it needs the data)")

    monkeypatch.setattr(pipeline, "build_task", no_task)
    loaded = pipeline.load_model(elsewhere / "model.pt", device="cpu")
    assert torch.equal(_outputs(loaded, batch), _outputs(model, batch))
    metrics = json.loads((run / "metrics.json").read_text())
    assert task.evaluate(loaded, "test") == pytest.approx(metrics["test_accuracy"])


def test_corrupt_model_pt_fails_its_checksum(run, tmp_path):
    data = bytearray((run / "model.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "model.pt").write_bytes(bytes(data))
    shutil.copy(run / "model.pt.sha256", tmp_path / "model.pt.sha256")
    with pytest.raises(CheckpointError, match="SHA-256 differs"):
        pipeline.load_model(tmp_path / "model.pt")


class _Marker:
    """Unpickling this would create a file: proof of code execution if the file appears."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def test_model_pt_with_a_pickled_object_and_a_good_checksum_is_refused(tmp_path):
    marker = tmp_path / "code-ran"
    buf = io.BytesIO()
    torch.save({"state_dict": _Marker(marker), "config": {}, "arch": {}}, buf)
    (tmp_path / "model.pt").write_bytes(buf.getvalue())
    (tmp_path / "model.pt.sha256").write_text(f"{hashlib.sha256(buf.getvalue()).hexdigest()}  model.pt\n")
    with pytest.raises(CheckpointError, match="could not be loaded"):
        pipeline.load_model(tmp_path / "model.pt")
    assert not marker.exists()


def test_old_model_pt_with_the_checkpoint_header_still_loads(run, reference, tmp_path):
    model, batch, _ = reference
    old = tmp_path / "old-run"
    shutil.copytree(run, old, ignore=shutil.ignore_patterns("checkpoints", "model.pt*", "export-*"))
    payload = torch.load(run / "model.pt", weights_only=True)
    save_checkpoint_file(old / "model.pt", {k: payload[k] for k in ("config", "arch", "state_dict", "attnas_version")})
    assert (old / "model.pt").read_bytes().startswith(b"ATTNAS-CKPT-1 ")
    assert torch.equal(_outputs(pipeline.load_model(old, device="cpu"), batch), _outputs(model, batch))
    with pytest.raises(RunDirError, match="through its run directory"):  # alone, it has no task sizes
        pipeline.load_model(old / "model.pt")


def _export(run, fmt, out):
    r = runner.invoke(app, ["export", str(run), "--format", fmt, "--out", str(out)])
    assert r.exit_code == 0, r.output
    return json.loads((out / "model.json").read_text())


def test_export_pytorch_is_a_plain_state_dict_that_load_model_reads(run, reference, tmp_path):
    model, batch, _ = reference
    info = _export(run, "pytorch", tmp_path / "pt")
    state = torch.load(tmp_path / "pt" / "weights.pt", weights_only=True)
    assert state.keys() == model.state_dict().keys()
    assert info["arch"] == json.loads((run / "arch.json").read_text())
    assert [i["name"] for i in info["inputs"]] == ["x", "edge_index"]
    assert torch.equal(_outputs(pipeline.load_model(tmp_path / "pt", device="cpu"), batch), _outputs(model, batch))


def test_export_safetensors(run, reference, tmp_path, monkeypatch):
    model, batch, _ = reference
    if importlib.util.find_spec("safetensors") is not None:
        _export(run, "safetensors", tmp_path / "st")
        loaded = pipeline.load_model(tmp_path / "st", device="cpu")
        assert torch.equal(_outputs(loaded, batch), _outputs(model, batch))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "safetensors" else real(name, *a))
    r = runner.invoke(app, ["export", str(run), "--format", "safetensors", "--out", str(tmp_path / "none")])
    assert r.exit_code == 2 and 'pip install "attnas[safetensors]"' in r.output and len(r.output.splitlines()) == 1
    assert not (tmp_path / "none").exists()


def test_export_torch_export_runs_with_torch_alone(run, reference, tmp_path):
    model, _, _ = reference
    info = _export(run, "torch-export", tmp_path / "te")
    assert info["check"]["max_abs_diff"] < 1e-5 and info["check"]["dynamic_dims"] == {"x": [0], "edge_index": [1]}
    task_info = TaskInfo(**{k: info["task_info"][k] for k in ("kind", "in_dim", "num_classes")})
    inputs = example_inputs(task_info, size=20, seed=3)  # another graph size than the traced one
    with torch.no_grad():
        expected = tensor_input_model(model, "node")(*inputs)
    torch.testing.assert_close(run_with_torch_alone(tmp_path / "te" / "model.pt2", inputs), expected,
                               rtol=1e-5, atol=1e-5)


def test_export_onnx(run, reference, tmp_path):
    for module in ("onnx", "onnxscript", "onnxruntime"):
        pytest.importorskip(module)
    import onnxruntime

    model, _, _ = reference
    info = _export(run, "onnx", tmp_path / "onnx")
    assert info["check"]["max_abs_diff"] < 1e-4
    task_info = TaskInfo(**{k: info["task_info"][k] for k in ("kind", "in_dim", "num_classes")})
    inputs = example_inputs(task_info, size=20, seed=3)
    session = onnxruntime.InferenceSession(str(tmp_path / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": inputs[0].numpy(), "edge_index": inputs[1].numpy()})[0]
    with torch.no_grad():
        expected = tensor_input_model(model, "node")(*inputs)
    torch.testing.assert_close(torch.from_numpy(got), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("args, message", [
    ([], "give one of --pick"),
    (["--pick", "0", "--format", "pytorch"], "give one of --pick"),
    (["--format", "tflite"], "unknown export format 'tflite'"),
])
def test_export_refuses_bad_options_in_one_line(run, args, message):
    r = runner.invoke(app, ["export", str(run), *args])
    assert r.exit_code == 2 and message in r.output and len(r.output.splitlines()) == 1


def test_a_block_wise_attention_model_traces_to_a_program_for_every_length():
    """DARTFormer's longformer attends in blocks of a few tokens; token inputs padded to
    max_len inside the wrapper keep the traced program from fixing the length's remainder."""
    from attnas.export.model_export import trace
    from attnas.runs.model_files import SavedTask
    from attnas.spaces.attention_mechanisms import AttentionMechanismsConfig, AttentionMechanismSpace

    torch.manual_seed(0)
    space = AttentionMechanismSpace(AttentionMechanismsConfig(dim=16, depth=1, heads=2, ffn_dim=32, pool="mean"))
    task = SavedTask({"kind": "sequence", "in_dim": 20, "num_classes": 3,
                      "extra": {"vocab_size": 20, "max_len": 24, "pad_id": 0}})
    model = space.build(space.arch({"mechanism": "longformer"}), task).eval()
    program, _ = trace(model, task.info)
    for batch, length in ((2, 9), (3, 16), (1, 24)):
        tokens = torch.randint(1, 20, (batch, length))
        mask = torch.ones(batch, length, dtype=torch.bool)
        mask[0, length // 2:] = False
        tokens = tokens.masked_fill(~mask, 0)
        with torch.no_grad():
            expected = model({"tokens": tokens, "mask": mask})  # the model itself, unpadded
            torch.testing.assert_close(program.module()(tokens, mask), expected, rtol=1e-5, atol=1e-5)
