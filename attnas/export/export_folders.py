"""Export folders (``attnas export --format ...``): their formats, files and how their weights are read.

Kept apart from :mod:`attnas.export.model_export` (which writes them and imports the pipeline) so
that :func:`attnas.pipeline.load_model` can read an export folder without an import cycle.
"""

from __future__ import annotations

import importlib.util
import io
import json
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from attnas.core.errors import CheckpointError, ConfigError, UnsupportedError, unknown_name
from attnas.runs.model_files import verify_checksum

FORMATS = ("pytorch", "safetensors", "torch-export", "onnx")
EXPORT_INFO = "model.json"
#: format -> the file it writes.
FILES = {"pytorch": "weights.pt", "safetensors": "weights.safetensors", "torch-export": "model.pt2",
         "onnx": "model.onnx"}
#: format -> (modules it needs, the pip requirement that brings them).
NEEDS = {"safetensors": (("safetensors",), 'pip install "attnas[safetensors]"'),
         "onnx": (("onnx", "onnxscript"), 'pip install "attnas[onnx]"')}


def check_format(fmt: str) -> None:
    """Refuse an unknown format, or one whose optional packages are missing (one line naming them).

    Raises:
        ConfigError: For an unknown format.
        UnsupportedError: When the format's packages are not installed.
    """
    if fmt not in FORMATS:
        raise ConfigError(unknown_name("export format", fmt, FORMATS))
    modules, pip = NEEDS.get(fmt, ((), ""))
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise UnsupportedError(f"--format {fmt} needs {' and '.join(missing)}, not installed: {pip}")


def read_export_folder(folder: str | Path) -> tuple[dict, Callable[[nn.Module], None] | None]:
    """The model payload of a ``pytorch`` or ``safetensors`` export folder, and how to load its
    weights (``None``: the payload's ``state_dict`` holds them).

    Raises:
        CheckpointError: When the weights are missing or fail their checksum.
        UnsupportedError: For a traced export (``torch-export``, ``onnx``), which torch or an
            ONNX runtime loads (``torch.export.load``, ``onnxruntime.InferenceSession``).
    """
    folder = Path(folder)
    info = json.loads((folder / EXPORT_INFO).read_text(encoding="utf-8"))
    fmt = info.get("export_format")
    if fmt not in ("pytorch", "safetensors"):
        raise UnsupportedError(f"{folder} holds a {fmt} export ({info.get('file')}); load it with "
                               + ("torch.export.load(path).module()" if fmt == "torch-export"
                                  else "onnxruntime.InferenceSession(path)"))
    weights = folder / FILES[fmt]
    if not weights.exists():
        raise CheckpointError(f"{folder} has no {weights.name}")
    payload = {"config": info["config"], "arch": info["arch"], "task_info": info["task_info"]}
    if fmt == "pytorch":
        data = weights.read_bytes()
        verify_checksum(weights, data)
        payload["state_dict"] = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        return payload, None
    check_format("safetensors")
    from safetensors.torch import load_model as load_safetensors

    return payload, lambda model: load_safetensors(model, str(weights))
