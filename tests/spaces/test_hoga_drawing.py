"""Drawing a HOGA cell like AutoLA's Figure 3."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from attnas.core.arch import Arch
from attnas.core.errors import ArchError
from attnas.spaces._hoga_drawing import main
from attnas.spaces.hoga import FIGURE3_EDGES, HOGAConfig, HOGASpace


def test_draws_figure3_and_a_two_group_cell_with_zero(tmp_path):
    space = HOGASpace()
    out = space.draw(space.cell(FIGURE3_EDGES), tmp_path / "fig3.png", title="Figure 3")
    with Image.open(out) as im:
        assert im.format == "PNG" and im.size[0] > 800
    small = HOGASpace(HOGAConfig(groups=2, width=8))
    out2 = small.draw(small.cell({"0-0": "zero", "0-1": "cbam", "1-1": "se"}), tmp_path / "k2.png")
    assert out2.stat().st_size > 1000


def test_refuses_an_invalid_cell(tmp_path):
    with pytest.raises(ArchError, match="unknown operation 'sse'"):
        HOGASpace().draw(HOGASpace().cell({**FIGURE3_EDGES, "0-0": "sse"}), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_command_line(tmp_path, capsys):
    path = tmp_path / "arch.json"
    path.write_text(HOGASpace().cell(FIGURE3_EDGES).to_json())
    main([str(path), str(tmp_path / "cell.png")])
    assert (tmp_path / "cell.png").exists()
    path.write_text(json.dumps(Arch("resnet-attention", {"attention": "se"}).to_dict()))
    with pytest.raises(SystemExit, match="not 'hoga'"):
        main([str(path), str(tmp_path / "other.png")])


def test_edge_weight_heat_map_of_a_derived_cell(tmp_path):
    import torch

    from attnas.tasks.base import TaskInfo

    class _Task:
        info = TaskInfo(kind="image", in_dim=1, num_classes=3)

    space = HOGASpace(HOGAConfig(groups=2, width=4))
    relaxed = space.relaxed(_Task())
    with torch.no_grad():
        relaxed.alpha[0, 2] = 1.0
    arch = space.derive(relaxed)
    path = tmp_path / "arch.json"
    path.write_text(arch.to_json())
    main([str(path), str(tmp_path / "cell.png"), "--weights", str(tmp_path / "alpha.png")])
    with Image.open(tmp_path / "alpha.png") as im:
        assert im.format == "PNG"
    path.write_text(space.cell(arch.choices["edges"]).to_json())  # no edge weights
    with pytest.raises(SystemExit, match="no meta.edge_weights"):
        main([str(path), str(tmp_path / "c2.png"), "--weights", str(tmp_path / "a2.png")])


def test_run_report_draws_the_cell_like_figure3(tmp_path, monkeypatch):
    from attnas.reporting import report
    from attnas.config import load_config
    from attnas.runs.run_dir import RunDir

    def generic(*_a, **_k):
        raise AssertionError("the generic DAG drawing was used for a HOGA cell")

    monkeypatch.setattr(report, "plot_arch", generic)
    run = RunDir.create(tmp_path / "run", load_config("autola-digits-quick").to_yaml(), {})
    run.write_text("arch.json", HOGASpace().cell(FIGURE3_EDGES).to_json())
    run.close()
    text = report.write_report(tmp_path / "run").read_text()
    assert "![architecture](architecture.png)" in text
    with Image.open(tmp_path / "run" / "architecture.png") as im:
        assert im.format == "PNG" and im.size[0] > 800
