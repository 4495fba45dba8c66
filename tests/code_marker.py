"""A pickle payload that proves code ran: unpickling it creates a file."""

from __future__ import annotations

import pathlib


class CodeRanMarker:
    """Unpickling this creates the file ``path``: proof of code execution if the file appears."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))
