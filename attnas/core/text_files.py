"""Reading a user's text files (recipes, architecture files, CSV data) in the encoding they are in.

Text is read as UTF-8, with a byte-order mark honoured: UTF-8 with a BOM (what Excel and
Notepad write) and UTF-16 (little- or big-endian, with its BOM: what PowerShell's ``>``
writes) are read as such. Anything else that is not UTF-8 is refused with one line that
names the file, the first bad byte and the encoding needed, instead of a
``UnicodeDecodeError`` from deep inside a reader.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from attnas.core.errors import AttnasError

#: Byte-order marks and the codec that reads the text after them (longest first).
NUL = b"\x00"
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def text_encoding(head: bytes) -> str:
    """The codec for a file that starts with ``head``: from its byte-order mark, else UTF-8."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec
    return "utf-8"


def decode_text(raw: bytes, source: str, error: type[AttnasError]) -> str:
    """``raw`` as text (see the module docstring for the encodings accepted).

    Args:
        raw: The file's bytes.
        source: What to name in the message (the file, with what it is).
        error: The error class to raise (e.g. :class:`~attnas.core.errors.DataError`).

    Raises:
        error: ``<source>: not a UTF-8 text file (byte 0xe9 at offset 9); save it as UTF-8 (or UTF-16
            with a byte-order mark)``.
    """
    codec = text_encoding(raw[:4])
    if codec == "utf-8" and NUL in raw[:1024]:  # UTF-8 text has no NUL bytes; UTF-16 has one in every ASCII letter
        raise error(f"{source}: not a UTF-8 text file (NUL bytes from offset {raw.index(NUL)}: UTF-16 without a "
                    "byte-order mark?); save it as UTF-8 (or UTF-16 with a byte-order mark)")
    try:
        return raw.decode(codec)
    except UnicodeDecodeError as exc:
        what = "UTF-16" if codec == "utf-16" else "UTF-8"
        raise error(f"{source}: not a {what} text file (byte 0x{exc.object[exc.start]:02x} at offset "
                    f"{exc.start}); "
                    "save it as UTF-8 (or UTF-16 with a byte-order mark)") from None


def read_text(path: str | Path, source: str, error: type[AttnasError]) -> str:
    """Read the file at ``path`` as text with :func:`decode_text`; an unreadable file raises ``error`` too."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise error(f"{source}: cannot read it: {exc.strerror or exc}") from None
    return decode_text(raw, source, error)
