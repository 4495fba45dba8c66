"""Reading users' text files in UTF-8, UTF-8 with a BOM and UTF-16 (attnas.core.text_files)."""

from __future__ import annotations

import codecs

import pytest

from attnas.core.errors import DataError
from attnas.core.text_files import decode_text, read_text


@pytest.mark.parametrize("raw", [
    "café,1\n".encode(), "café,1\n".encode("utf-8-sig"), "café,1\n".encode("utf-16"),
    codecs.BOM_UTF16_BE + "café,1\n".encode("utf-16-be"),
], ids=["utf-8", "utf-8-bom", "utf-16", "utf-16-be"])
def test_the_encodings_users_save_in_are_read(raw):
    assert decode_text(raw, "f", DataError) == "café,1\n"


@pytest.mark.parametrize("raw, message", [
    ("café".encode("latin-1"), r"f: not a UTF-8 text file \(byte 0xe9 at offset 3\); save it as UTF-8"),
    ("ab".encode("utf-16-le"), r"f: not a UTF-8 text file \(NUL bytes from offset 1: UTF-16 without a byte-order"),
    (codecs.BOM_UTF16_LE + b"a", r"f: not a UTF-16 text file"),
], ids=["latin-1", "utf-16-without-bom", "odd-utf-16"])
def test_other_bytes_name_the_encoding_needed(raw, message):
    with pytest.raises(DataError, match=message):
        decode_text(raw, "f", DataError)


def test_a_missing_file_is_the_callers_error(tmp_path):
    with pytest.raises(DataError, match="cannot read it"):
        read_text(tmp_path / "none.csv", "csv none.csv", DataError)
