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


#: The papers' numbers in the project's notes, as the papers' names.
PAPERS = {
    "000": "AutoAttend (Guan et al., ICML 2021)",
    "001": "the attention-mechanism search paper",
    "002": "AutoLA (Ma et al., NeurIPS 2020)",
    "003": "Zhou et al.",
    "004": "Chatzianastasis et al.",
}

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]*)`")  # :class:`~a.b.C`, :py:func:`f`, :math:`x`
_TARGET = re.compile(r"^(.*?)\s*<[^>]*>$")  # :ref:`text <target>` -> text
_LITERAL = re.compile(r"``([^`]+)``|`([^`]+)`_?")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}(?=\S)([^*]+?)(?<=\S)\*{1,2}(?![\w*])")
_PAPER = re.compile(r"\b([Pp])aper (00[0-4])\b('s)?")
_ISSUE_ONLY = re.compile(r"\s*\((?:see )?issues? \d+(?:(?:,| and) \d+)*\)")
_ISSUE = re.compile(r"(?P<before>[,;]\s*)?\b[Ii]ssues? \d+(?:(?:,| and) \d+)*(?P<after>\s*[,;])?")
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


def _without_issue(match: re.Match) -> str:
    """A reference to an issue inside a sentence, dropped with one of its separators."""
    before, after = match.group("before"), match.group("after")
    return before if before and after else ""


def _paper(match: re.Match) -> str:
    name = PAPERS[match.group(2)]
    if match.group(1) == "P" and name.startswith("the "):
        name = "T" + name[1:]
    return name + (match.group(3) or "")


def plain_text(text: str) -> str:
    """One line of help as plain words: reStructuredText/Markdown markup removed (````x````,
    ``:class:`~a.B``` -> ``B``, ``*x*``), the papers named instead of numbered and references to
    the project's issues dropped."""
    text = _ROLE.sub(_role, text)
    text = _LITERAL.sub(lambda m: m.group(1) or m.group(2), text)
    text = _EMPHASIS.sub(r"\1", text)
    text = _PAPER.sub(_paper, text)
    text = _ISSUE_ONLY.sub("", text)
    text = _ISSUE.sub(_without_issue, text)
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", re.sub(r"\s*\(\s*\)", "", text)))
    return " ".join(text.split())
