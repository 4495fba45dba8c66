"""The example plugin (examples/attnas_plugin_example) is found through its entry point.

The package is not pip-installed: a folder holding an ``attnas_plugin_example-0.1.0.dist-info``
with the ``entry_points.txt`` and ``METADATA`` that pip would write (the entry point copied
from the example's own ``pyproject.toml``) is put on a fresh Python's path, beside the
example's source folder. ``importlib.metadata`` then sees the distribution as installed, and
attnas's registry loads it at its first lookup, as it would after ``pip install``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "attnas_plugin_example"

CHILD = r"""
import json, sys
import torch
from attnas import registry
from attnas.config import load_config
from attnas.core.arch import Arch
from attnas.runs.build import build_space, build_task, pick_device

recipe = sys.argv[1]
out = {"mechanisms": registry.names("op", "mechanism"), "spaces": registry.names("space")}
config = load_config(recipe)
space = build_space(config)
task = build_task(config, None, pick_device("cpu"))
torch.manual_seed(0)
arch = Arch(space="mechanism-width", choices={"mechanism": "cosine", "dim": 32})
model = space.build(arch, task).eval()
batch = next(iter(task.batches("val", batch_size=5)))
with torch.no_grad():
    logits = model(batch)
out["logits_shape"] = list(logits.shape)
out["finite"] = bool(torch.isfinite(logits).all())
out["num_classes"] = task.info.num_classes
out["size"] = space.size()
out["sample"] = space.sample(__import__("random").Random(0)).choices
out["cosine_blocks"] = sum(type(m).__name__ == "CosineAttention" for m in model.modules())
out["depth"] = config.space.options.depth
print("RESULT " + json.dumps(out))
"""


def fake_install(site: Path) -> None:
    """Write the metadata pip would install for the example into ``site``."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = project["entry-points"]
    lines = []
    for group, entries in groups.items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def test_the_entry_point_registers_the_operation_and_the_space_and_a_model_builds(tmp_path):
    site = tmp_path / "site"
    fake_install(site)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(EXAMPLE), str(site)]), ATTNAS_PROGRESS="0")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(EXAMPLE / "mechanism-width-listops.yaml")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "plugin failed to load" not in proc.stderr
    result = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert "cosine" in result["mechanisms"] and "softmax" in result["mechanisms"]
    assert "mechanism-width" in result["spaces"]
    assert result["size"] == 4
    assert set(result["sample"]) == {"mechanism", "dim"}
    assert result["cosine_blocks"] == result["depth"] == 2  # the plugin's mechanism in every layer
    assert result["logits_shape"] == [5, result["num_classes"]] and result["finite"]


def test_without_the_entry_point_the_plugin_is_not_loaded(tmp_path):
    """The same child without the metadata folder: attnas alone has neither name."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(EXAMPLE)]), ATTNAS_PROGRESS="0")
    code = ("import json; from attnas import registry; "
            "print(json.dumps([registry.names('op', 'mechanism'), registry.names('space')]))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    mechanisms, spaces = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "softmax" in mechanisms and "cosine" not in mechanisms
    assert "mechanism-width" not in spaces
