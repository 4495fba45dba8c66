"""``attnas report``: report.md and its figures, each written atomically."""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from attnas import pipeline
from attnas.reporting.report import relative_paths, rerank_order_sentence, write_report

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

#: Float32 noise as printed: 10 or more decimals (a float rounded to 6 significant digits has at most 9:
#: 0.000123457; smaller ones print as 1.23457e-05).
NOISE = r"\d\.\d{10,}"


def files(folder):
    return sorted(p.name for p in folder.iterdir() if p.is_file())


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    return pipeline.search(TINY, out=tmp_path_factory.mktemp("report") / "run")


@pytest.fixture(scope="module")
def report_text(tiny_run):
    return tiny_run.path, write_report(tiny_run.path).read_text()


def test_figures_are_replaced_whole_or_not_at_all(tiny_run, report_text, monkeypatch):
    run = tiny_run
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


def test_the_report_holds_no_absolute_path_of_the_machine(report_text):
    run_path, text = report_text
    assert "- run directory: `run`" in text
    for absolute in {str(run_path), str(run_path.parent), str(Path.home()), os.getcwd()}:
        assert absolute not in text
    assert not re.search(r"(?<![\w.])/(?:tmp|home|work|root|Users|var)/", text)


def test_the_report_prints_rounded_metrics(report_text, tmp_path):
    run_path, text = report_text
    metrics = json.loads((run_path / "metrics.json").read_text())
    noisy = [v for v in metrics.values() if isinstance(v, float) and len(repr(v)) > 12]
    assert noisy, "metrics.json keeps full precision"
    assert not re.search(NOISE, text)


def test_a_config_path_is_written_relative_to_the_run_folder(tmp_path):
    data = tmp_path / "data" / "graph.npz"
    data.parent.mkdir()
    data.write_bytes(b"")
    run = tmp_path / "runs" / "run"
    run.mkdir(parents=True)
    config = {"task": {"path": str(data), "dataset": "graph-file"}, "space": {"ops": ["gcn", "/not/a/file"]}}
    assert relative_paths(config, run) == {"task": {"path": "../../data/graph.npz", "dataset": "graph-file"},
                                           "space": {"ops": ["gcn", "/not/a/file"]}}


@pytest.mark.parametrize("supernet,reranked,rank,expected", [
    ([0.9, 0.8, 0.7], [0.9, 0.8, 0.7], 1, "kept the supernet's first choice. Kendall's tau between the two orders "
                                           "over 3 candidates: 1.00 (1: the same order, -1: the reverse)."),
    ([0.9, 0.8, 0.7, 0.6, 0.5], [0.8, 0.8, 0.8, 0.8, 0.8], 5,
     "chose the supernet's rank 5, not its first choice. Kendall's tau between the two orders is undefined: "
     "the re-ranked scores of the 5 candidates are all equal."),
    ([0.9, 0.8], [0.7, 0.8], 2, "chose the supernet's rank 2, not its first choice. Kendall's tau between the two "
                                "orders over 2 candidates: -1.00"),
    ([0.5, 0.5], [0.5, 0.5], 1, "kept the supernet's first choice. Kendall's tau between the two orders is "
                                "undefined: the supernet and the re-ranked scores"),
    ([0.9], [0.7], 1, "kept the supernet's first choice."),
])
def test_the_re_ranking_sentence_says_what_was_chosen_and_tau_only_when_defined(supernet, reranked, rank, expected):
    sentence = rerank_order_sentence(supernet, reranked, rank)
    assert expected in sentence and "nan" not in sentence
    if len(supernet) == 1:
        assert "tau" not in sentence


def test_the_report_states_the_re_ranking_choice(report_text):
    _, text = report_text
    assert re.search(r"The re-ranking (kept the supernet's first choice|chose the supernet's rank 2)", text)
