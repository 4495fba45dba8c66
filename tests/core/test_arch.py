"""Arch documents: plain JSON data, validated on load."""

from __future__ import annotations

import json

import pytest

from attnas.core.arch import Arch, load_arch
from attnas.core.errors import ArchError


def test_round_trip_and_key():
    a = Arch("autoattend", {"layers": [{"type": "add", "inputs": [{"source": 0, "op": "gcn"}] * 2}]})
    b = Arch.from_json(a.to_json())
    assert a == b and a.key() == b.key() and hash(a) == hash(b)
    assert b.to_dict()["version"] == 1


@pytest.mark.parametrize("text,message", [
    ('{"space": "autoattend"', "malformed JSON at line 1"),
    ('[1, 2]', "expected a JSON object"),
    ('{"space": "autoattend", "choices": {}, "extra": 1}', "unknown key 'extra'"),
    ('{"choices": {}}', "missing key 'space'"),
    ('{"space": "autoattend", "version": 9, "choices": {}}', "unsupported arch version 9"),
    ('{"space": "autoattend", "choices": []}', "choices: expected a JSON object"),
    ('{"space": "", "choices": {}}', "space: expected a non-empty string"),
])
def test_malformed_documents(text, message):
    with pytest.raises(ArchError, match=message.replace("[", r"\[")):
        Arch.from_json(text)


def test_choices_must_be_json_data():
    with pytest.raises(ArchError, match="is not JSON data"):
        Arch("x", {"a": object()})


def test_load_arch_validates_against_space(tmp_path):
    from attnas.spaces.autoattend import AutoAttendConfig, AutoAttendSpace

    space = AutoAttendSpace(AutoAttendConfig(layers=1))
    doc = {"space": "autoattend", "version": 1,
           "choices": {"layers": [{"type": "add", "inputs": [{"source": 0, "op": "gcnn"}, {"source": 0, "op": "zero"}]}]}}
    p = tmp_path / "arch.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ArchError, match=r"arch.json: layer 1 input 1: unknown operation 'gcnn' \(did you mean 'gcn'\?\)"):
        load_arch(p, space)
    with pytest.raises(ArchError, match="cannot read"):
        load_arch(tmp_path / "missing.json")
