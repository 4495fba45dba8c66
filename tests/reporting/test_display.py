"""Text for people: numbers rounded where printed, help texts as plain words (attnas.reporting.display)."""

from __future__ import annotations

import json
import math
import re

import pytest
from typer.testing import CliRunner

from attnas.cli import app
from attnas.reporting.display import plain_text, rounded

#: Markup and internal words a printed line must not hold.
MARKUP = re.compile(r"``|:[a-z]+:`|`|(?<![\w*])\*\S[^*]*\S\*(?![\w*])|\b[Ii]ssues? \d|\b[Pp]aper 00\d")


def test_float32_noise_is_rounded_and_everything_else_kept():
    data = {"val_accuracy": 0.8270000219345093, "per_seed": [0.9622204899787903, 2, float("nan")],
            "nested": {"loss": 1.2345678901e-7, "name": "gcn", "epochs": 200}, "seconds": 14.27}
    out = rounded(data)
    assert out["val_accuracy"] == 0.827 and out["per_seed"][:2] == [0.96222, 2] and math.isnan(out["per_seed"][2])
    assert out["nested"] == {"loss": 1.23457e-7, "name": "gcn", "epochs": 200} and out["seconds"] == 14.27
    assert "0.8270000219345093" not in json.dumps(out)


@pytest.mark.parametrize("text,plain", [
    ("GCN (for the ``fixed`` strategy).", "GCN (for the fixed strategy)."),
    ("validated (see :class:`~attnas.data.csv.CsvOptions`).", "validated (see CsvOptions)."),
    ("a graph (:mod:`attnas.data.csbm`), on", "a graph (attnas.data.csbm), on"),
    ("Table 3: :math:`x \\mapsto x` (pad)", "Table 3: x ↦ x (pad)"),
    ("a *word* and **bold**, 1 * F, N(0,1)*1e-3", "a word and bold, 1 * F, N(0,1)*1e-3"),
    ("run `attnas retrain RUN`.", "run attnas retrain RUN."),
])
def test_plain_text_removes_markup_and_internal_words(text, plain):
    assert plain_text(text) == plain


def test_attnas_list_prints_every_entry_as_plain_text():
    r = CliRunner().invoke(app, ["list"], catch_exceptions=False)
    assert r.exit_code == 0
    entries = [line for line in r.output.splitlines() if line.startswith("  ")]
    assert len(entries) > 100
    bad = [line for line in entries if MARKUP.search(line)]
    assert not bad, "\n".join(bad)
