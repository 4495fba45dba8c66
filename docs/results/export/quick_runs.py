"""Finished runs' models, loaded and exported, against the original on a real test batch.

For each run folder: the model rebuilt on its task with the data (the original); the model
loaded by ``attnas.load_model`` from a copy of its ``model.pt`` alone, with ``ATTNAS_DATA``
pointing at an empty folder and task building switched off (a ``model.pt`` from before models
stored their sizes goes through ``attnas export --format pytorch`` first); the ``torch-export``
program run in a separate Python that cannot import attnas or torch_geometric; the ONNX model
run by onnxruntime. Prints the largest output difference of each (a markdown table).

    ATTNAS_DATA=../shared/data python -m docs.results.export.quick_runs RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import torch

def _diff(a: torch.Tensor, b: torch.Tensor) -> str:
    return f"{float((a.float() - b.float()).abs().max()):.1e}"


def check(run: Path, tmp: Path) -> list[str]:
    from attnas import pipeline
    from attnas.core.errors import AttnasError
    from attnas.export.model_export import export_run, run_with_torch_alone
    from attnas.export.model_inputs import tensor_input_model, tensors_of

    _, config, _, _ = pipeline.open_finished(run)
    task = pipeline.run_task(pipeline.RunDir(run), config, device="cpu")
    kind = task.info.kind
    original = pipeline.load_model(run, device="cpu")
    inputs = tuple(t.cpu() for t in tensors_of(kind, next(task.batches("test"))))
    with torch.no_grad():
        expected = tensor_input_model(original, kind)(*inputs)
    cells = [run.name, kind, "x".join(map(str, inputs[0].shape))]
    copy = tmp / f"{run.name}-copy"
    copy.mkdir()
    legacy = (run / "model.pt").read_bytes().startswith(b"ATTNAS-CKPT-1 ")
    if legacy:
        export_run(run, "pytorch", copy / "export")
        source = copy / "export"
    else:
        for name in ("model.pt", "model.pt.sha256"):
            shutil.copy(run / name, copy / name)
        source = copy / "model.pt"
    def no_task(*args, **kwargs):
        raise AssertionError("load_model built the task (it needs the data)")

    saved_build, saved_root = pipeline.build_task, os.environ.get("ATTNAS_DATA", "")
    pipeline.build_task, os.environ["ATTNAS_DATA"] = no_task, str(tmp / "empty")
    try:
        loaded = pipeline.load_model(source, device="cpu")
    finally:
        pipeline.build_task, os.environ["ATTNAS_DATA"] = saved_build, saved_root
    with torch.no_grad():
        cells.append(_diff(tensor_input_model(loaded, kind)(*inputs), expected) + (" (via export)" if legacy else ""))
    try:
        export_run(run, "torch-export", copy / "te")
        cells.append(_diff(run_with_torch_alone(copy / "te" / "model.pt2", inputs), expected))
    except AttnasError as exc:
        cells.append(f"no: {exc}")
    try:
        import onnxruntime

        export_run(run, "onnx", copy / "onnx")
        session = onnxruntime.InferenceSession(str(copy / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
        got = session.run(None, {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)})[0]
        cells.append(_diff(torch.from_numpy(got), expected))
    except (AttnasError, ModuleNotFoundError) as exc:
        cells.append(f"no: {exc}")
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own errors when the model does not run on this batch
        cells.append(f"no: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
    return cells


def main() -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    print("| run | task | input | load_model, no data | torch.export, no attnas | ONNX (onnxruntime) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for run in map(Path, sys.argv[1:]):
            print("| " + " | ".join(check(run, Path(tmp))) + " |", flush=True)


if __name__ == "__main__":
    main()
