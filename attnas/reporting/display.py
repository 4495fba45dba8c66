"""Text for people: numbers rounded where they are printed, docstrings as plain text.

Files that programs read (``metrics.json``, ``compare.json``, ...) keep every number at full
precision; what a person reads (the command's output, ``report.md``) shows them through
:func:`rounded`, so that a float32 score ``0.8270000219345093`` prints as ``0.827``. Help texts
of registered components are docstrings written for the API reference; :func:`plain_text`
turns their reStructuredText markup into plain words for ``attnas list``.
"""

from __future__ import annotations

import math
import re
from typing import Any

#: Significant digits a printed number keeps: float32 carries about 7, so 6 drop its noise.
DIGITS = 6


def rounded(data: Any, digits: int = DIGITS) -> Any:
    """``data`` (plain data: dicts, lists, numbers, strings) with every float rounded to
    ``digits`` significant digits (integers, NaN and infinities unchanged)."""
    if isinstance(data, dict):
        return {k: rounded(v, digits) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [rounded(v, digits) for v in data]
    if isinstance(data, float) and math.isfinite(data):
        return float(f"{data:.{digits}g}")
    return data


_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]*)`")  # :class:`~a.b.C`, :py:func:`f`, :math:`x`
_TARGET = re.compile(r"^(.*?)\s*<[^>]*>$")  # :ref:`text <target>` -> text
_LITERAL = re.compile(r"``([^`]+)``|`([^`]+)`_?")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}(?=\S)([^*]+?)(?<=\S)\*{1,2}(?![\w*])")
_LATEX = {r"\mapsto": "↦", r"\cdot": "·", r"\times": "×", r"\odot": "⊙", r"\otimes": "⊗", r"\sigma": "σ",
          r"\alpha": "α", r"\beta": "β", r"\in": "∈", r"\to": "→", r"\sum": "Σ", r"\leq": "≤", r"\geq": "≥"}


def _role(match: re.Match) -> str:
    inner = match.group(1)
    target = _TARGET.match(inner)
    if target:
        return target.group(1)
    if match.group(0).startswith(":math:"):
        for tex, symbol in _LATEX.items():
            inner = re.sub(re.escape(tex) + r"(?![A-Za-z])", symbol, inner)
        return inner.replace("{", "").replace("}", "").replace("\\", "")
    return inner.rsplit(".", 1)[-1] if match.group(0)[1:].split(":")[0] in ("class", "func", "meth", "attr",
                                                                          "exc", "obj", "data") else inner


def plain_text(text: str) -> str:
    """One line of help as plain words: reStructuredText/Markdown markup removed (````x````,
    ``:class:`~a.B``` -> ``B``, ``*x*``)."""
    text = _ROLE.sub(_role, text)
    text = _LITERAL.sub(lambda m: m.group(1) or m.group(2), text)
    text = _EMPHASIS.sub(r"\1", text)
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", re.sub(r"\s*\(\s*\)", "", text)))
    return " ".join(text.split())
