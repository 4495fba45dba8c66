"""``attnas report``: report.md and its figures, each written atomically."""

from __future__ import annotations

import errno

import pytest
from matplotlib.figure import Figure

from attnas import pipeline
from attnas.report import write_report

TINY = {
    "name": "tiny-report",
    "task": {"name": "node-classification", "dataset": "digits-graph"},
    "space": {"name": "autoattend", "layers": 2, "hidden": 8, "pool": "pyg", "ops": ["zero", "identity", "gcn"],
              "heads": 2, "op_heads": 2},
    "strategy": {"name": "one-shot-evolution", "supernet": {"epochs": 3, "checkpoint_every": 3},
                 "evolution": {"population": 4, "parents": 2, "children": 2, "rounds": 1, "checkpoint_every": 4},
                 "rerank": {"top_k": 2, "epochs": 1}},
    "retrain": {"epochs": 2, "patience": 0},
}


def files(folder):
    return sorted(p.name for p in folder.iterdir() if p.is_file())


def test_figures_are_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    run = pipeline.search(TINY, out=tmp_path / "run")
    write_report(run.path)
    figures = {name: run.file(name).read_bytes() for name in ("search_progress.png", "architecture.png",
                                                               "rerank.png")}
    assert all(len(data) > 1000 for data in figures.values())
    written = files(run.path)
    assert not [name for name in written if ".tmp" in name]

    def disk_full(self, fname, **kwargs):  # half a figure, then the disk is full
        with open(fname, "wb") as fh:
            fh.write(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        write_report(run.path)
    assert {name: run.file(name).read_bytes() for name in figures} == figures  # the old figures, whole
    assert files(run.path) == written  # and no temporary file left
