"""``attnas export RUN_DIR --format F``: a run's final model in a form that leaves attnas.

Every format writes a folder with ``model.json`` (format, the run's config and architecture,
the task facts ``build()`` reads, the model's inputs), ``arch.json`` and ``config.yaml``, and:

- ``pytorch``: ``weights.pt``, a plain ``state_dict`` (``torch.load(..., weights_only=True)``),
  its SHA-256 in ``weights.pt.sha256``;
- ``safetensors``: ``weights.safetensors`` (needs the ``safetensors`` package: the
  ``attnas[safetensors]`` extra);
- ``torch-export``: ``model.pt2``, the model traced by ``torch.export.export`` with tensor
  inputs (:mod:`attnas.export.model_inputs`); ``torch.export.load(path).module()(*inputs)`` runs it
  with torch alone (the check runs it in a Python that cannot import attnas or torch_geometric);
- ``onnx``: ``model.onnx`` from ``torch.onnx.export`` (needs ``onnx`` and ``onnxscript``; the
  ``attnas[onnx]`` extra, which also brings ``onnxruntime`` to check it).

``attnas.load_model(folder)`` rebuilds the ``pytorch`` and ``safetensors`` exports without any
training data. Traced formats are checked after writing: the exported program and the model
run on the same example inputs and the largest difference of their outputs goes to
``model.json`` (``check``). The compiled CPU kernels of :mod:`attnas.kernels` are switched off
while tracing, so the program holds plain PyTorch operations only.
"""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnas._version import __version__
from attnas.core.errors import RunDirError, UnsupportedError
from attnas.export.export_folders import EXPORT_INFO, FILES, check_format, read_export_folder
from attnas.export.model_inputs import INPUTS, dynamic_shapes, example_inputs, input_names, tensor_input_model
from attnas.ops.overrides import eager_only
from attnas.runs.atomic_files import atomic_write_bytes, atomic_write_json, atomic_write_text
from attnas.runs.model_files import SavedTask, load_model_file, plain_task_info, write_checksum


def export_run(run_dir: str | Path, fmt: str, out: str | Path | None = None,
               data_dir: str | Path | None = None) -> dict:
    """Export a finished run's final model.

    Args:
        run_dir: A run directory with a ``model.pt``.
        fmt: One of :data:`attnas.export.export_folders.FORMATS`.
        out: The folder to write (default ``RUN_DIR/export-<format>``).
        data_dir: The data root, only for a ``model.pt`` written before it stored its task facts.

    Returns:
        The ``model.json`` written, with ``path`` (the folder).

    Raises:
        UnsupportedError: When the model's operations cannot be traced (the reason in one line).
    """
    from attnas.pipeline import model_from_payload, open_finished, run_task
    from attnas.runs.run_dir import RunDir

    check_format(fmt)
    run, config, _, _ = open_finished(run_dir, final_model=True)
    if not run.exists(RunDir.MODEL):
        raise RunDirError(f"{run.path} has no model.pt (the final training has not finished)")
    payload = load_model_file(run.file(RunDir.MODEL))
    if not payload.get("task_info"):  # a model.pt from before the task facts were stored
        payload["task_info"] = plain_task_info(run_task(run, config, data_dir, "cpu").info)
    kind = payload["task_info"]["kind"]
    if fmt in ("torch-export", "onnx"):
        input_names(kind)
    model = model_from_payload(payload, device="cpu")
    folder = Path(out) if out is not None else run.path / f"export-{fmt}"
    folder.mkdir(parents=True, exist_ok=True)
    info = {"format": "attnas-export", "format_version": 1, "export_format": fmt, "file": FILES[fmt],
            "attnas_version": __version__, "config": payload["config"], "arch": payload["arch"],
            "task_info": payload["task_info"],
            "inputs": [{"name": n, "is": what} for n, what in INPUTS.get(kind, ())]}
    write = {"pytorch": _write_pytorch, "safetensors": _write_safetensors, "torch-export": _write_torch_export,
             "onnx": _write_onnx}[fmt]
    check = write(model, SavedTask(payload["task_info"]).info, folder / FILES[fmt])
    if check is not None:
        info["check"] = check
    atomic_write_text(folder / "arch.json", json.dumps(payload["arch"], indent=2) + "\n")
    atomic_write_text(folder / "config.yaml", config.to_yaml())
    atomic_write_json(folder / EXPORT_INFO, info)
    return {**info, "path": str(folder)}


def _write_pytorch(model: nn.Module, info: Any, path: Path) -> None:
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, buf)
    atomic_write_bytes(path, buf.getvalue())
    write_checksum(path, buf.getvalue())


def _write_safetensors(model: nn.Module, info: Any, path: Path) -> None:
    from safetensors.torch import save_model

    save_model(model, str(path), metadata={"format": "attnas-export", "attnas_version": __version__})


def trace(model: nn.Module, info: Any) -> tuple[Any, tuple[torch.Tensor, ...]]:
    """``torch.export.export`` of the model with tensor inputs, with the compiled kernels off.

    Args:
        model: A found model.
        info: The TaskInfo it was built from (the kind of its inputs and their sizes).

    Returns:
        The exported program and the example inputs it was traced with.

    Raises:
        UnsupportedError: With the first line of torch's reason when tracing fails.
    """
    wrapped, inputs = tensor_input_model(model, info.kind, info), example_inputs(info)
    try:
        with eager_only(), torch.no_grad():
            return torch.export.export(wrapped, inputs, dynamic_shapes=dynamic_shapes(info.kind)), inputs
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds; the first line says why
        raise UnsupportedError(f"torch.export cannot trace this model: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:400]


def _largest_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        raise UnsupportedError(f"the exported model's output has shape {tuple(b.shape)}, the model's {tuple(a.shape)}")
    return float((a.float() - b.float()).abs().max())


def _write_torch_export(model: nn.Module, info: Any, path: Path) -> dict:
    program, inputs = trace(model, info)
    with torch.no_grad():
        expected = tensor_input_model(model, info.kind, info)(*inputs)
    atomic_write_bytes(path, saved_program(program))
    got = run_with_torch_alone(path, inputs)
    return {"inputs": "example_inputs (attnas.export.model_inputs)", "max_abs_diff": _largest_difference(expected, got),
            "runtime": "torch alone (a fresh Python without attnas and torch_geometric)",
            "dynamic_dims": dynamic_dims(program)}


#: Run in a fresh Python: load an exported program and run it with torch alone (attnas and
#: torch_geometric cannot be imported there).
_PLAIN_TORCH = """
import sys, torch
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("attnas", "torch_geometric"):
            raise ImportError(name + " cannot be imported here")
sys.meta_path.insert(0, Block())
torch.set_num_threads(1)
program = torch.export.load(sys.argv[1]).module()
with torch.no_grad():
    torch.save(program(*torch.load(sys.argv[2], weights_only=True)), sys.argv[3])
"""


def run_with_torch_alone(program_path: str | Path, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Run a ``model.pt2`` on ``inputs`` in a fresh Python in which attnas and torch_geometric
    cannot be imported (what a user without attnas has).

    Raises:
        UnsupportedError: With the last line of the error when the program does not run there.
    """
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        torch.save(tuple(inputs), tmp / "inputs.pt")
        result = subprocess.run([sys.executable, "-c", _PLAIN_TORCH, str(Path(program_path).resolve()),
                                 str(tmp / "inputs.pt"), str(tmp / "out.pt")], cwd=tmp, capture_output=True,
                                text=True, env={"PATH": "/usr/bin:/bin"})
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines() or ["(no message)"]
            raise UnsupportedError(f"the exported program does not run with torch alone: {lines[-1]}")
        return torch.load(tmp / "out.pt", weights_only=True)


def saved_program(program: Any) -> bytes:
    """The bytes ``torch.export.save`` writes for ``program``.

    Raises:
        UnsupportedError: When the program holds something torch cannot serialise.
    """
    buf = io.BytesIO()
    try:
        torch.export.save(program, buf)
    except Exception as exc:  # noqa: BLE001 - the serialiser raises several kinds
        raise UnsupportedError(f"torch.export.save cannot write this model's program: {_first_line(exc)}") from None
    return buf.getvalue()


def dynamic_dims(program: Any) -> dict[str, list[int]]:
    """For each user input of an exported program, the dimensions left dynamic."""
    out = {}
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in program.graph_signature.user_inputs:
            val = node.meta.get("val")
            out[node.name] = [i for i, d in enumerate(getattr(val, "shape", ())) if isinstance(d, torch.SymInt)]
    return out


def _write_onnx(model: nn.Module, info: Any, path: Path) -> dict:
    kind = info.kind
    wrapped, inputs = tensor_input_model(model, kind, info), example_inputs(info)
    names = input_names(kind)
    try:
        with eager_only(), torch.no_grad():
            onnx_program = torch.onnx.export(wrapped, inputs, dynamo=True, input_names=names,
                                             output_names=["logits"], dynamic_shapes=dynamic_shapes(kind),
                                             verbose=False)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds; the first line says why
        raise UnsupportedError(f"torch.onnx.export cannot export this model: {_first_line(exc)}") from None
    tmp = path.with_name(f".{path.name}.tmp")
    onnx_program.save(str(tmp))
    tmp.replace(path)
    if importlib.util.find_spec("onnxruntime") is None:
        return {"checked": False, "why": "onnxruntime is not installed (pip install onnxruntime)"}
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def difference(x: tuple[torch.Tensor, ...]) -> float:
        with torch.no_grad():
            expected = wrapped(*x)
        got = session.run(None, {i.name: t.numpy() for i, t in zip(session.get_inputs(), x)})[0]
        return _largest_difference(expected, torch.from_numpy(got))

    check = {"inputs": "example_inputs (attnas.export.model_inputs)", "max_abs_diff": difference(inputs),
             "runtime": f"onnxruntime {onnxruntime.__version__}"}
    try:  # other sizes than the traced ones (nodes, batch, length)
        check["other_size_max_abs_diff"] = difference(example_inputs(info, size=5, seed=1))
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own kinds
        check["other_sizes"] = f"fails: {_first_line(exc)}"
    return check


def load_exported(folder: str | Path, device: str | None = None) -> nn.Module:
    """Rebuild the model of a ``pytorch`` or ``safetensors`` export folder (no data needed;
    see :func:`attnas.export.export_folders.read_export_folder`)."""
    from attnas.pipeline import model_from_payload

    payload, load_weights = read_export_folder(folder)
    return model_from_payload(payload, device=device, load_weights=load_weights)

