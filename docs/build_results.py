"""Assemble docs/results.md, the results page for users, from one summary per method.

Each method has a short summary, ``docs/results/summaries/<name>.md`` (the paper's table
beside ours, the command and the commit of every figure, what is not reproduced and why),
and a detail page, ``docs/results/<name>.md`` (the full tables and measurements), which the
summary links. This script concatenates the summaries, in a fixed order, under a common
preamble; the page stays at most :data:`MAX_LINES` lines. Run it after editing a summary::

    python docs/build_results.py            # rewrite docs/results.md
    python docs/build_results.py --check    # exit 1 if docs/results.md is not up to date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUMMARIES = HERE / "results" / "summaries"
DETAILS = HERE / "results"
PAGE = HERE / "results.md"
#: The sections in page order: the methods, the comparison with hand-designed attention,
#: bad inputs and faults, then speed and scale-out.
ORDER = ["autoattend_graph", "heterophilous", "autoattend_text", "dartformer", "mqar", "autola", "fullattn", "opemb",
         "nas_bench_graph", "compare", "bad_inputs", "kernels", "scaleout", "export", "startup"]
MAX_LINES = 900  # 14 sections; each summary stays short, detail tables go to the detail pages
PREAMBLE = """# Measured results

What attnas reproduces of each paper, and what it does not. Each section puts the paper's
table beside ours, with the command and the commit behind every figure, and says what is
not reproduced and why. "Code of" names the commit a measurement ran on; "recorded in" names
the commit that added a figure to the documentation (measured on the code of that time).
Unless a section says otherwise the machine is a 2-core CPU without a GPU (the load average
is given with each timing), so most rows ran at a reduced scale that the section states.
Each recipe setting that departs from its paper names the data that chose it (validation
data only, docs/developing.md, "Selection discipline"; where a setting was chosen on test
accuracy, the section says so), and each verdict says over which seeds it was computed.
Each section links a detail page under `docs/results/` with the full tables and measurements.
"""


def demote_headings(text: str) -> str:
    """Shift a section's Markdown headings so its top heading is level 2 (code blocks untouched)."""
    lines = text.splitlines()
    fenced, levels = False, []
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            levels.append(len(line) - len(line.lstrip("#")))
    shift = 2 - min(levels) if levels else 0
    out, fenced = [], False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#") and shift:
            level = len(line) - len(line.lstrip("#"))
            line = "#" * max(1, level + shift) + line[level:]
        out.append(line)
    return "\n".join(out)


def build() -> str:
    """The page's text.

    Raises:
        SystemExit: When a summary is missing, does not link its method's detail page, or
            the page would exceed :data:`MAX_LINES` lines.
    """
    parts = [PREAMBLE]
    for name in ORDER:
        path = SUMMARIES / f"{name}.md"
        if not path.exists():
            raise SystemExit(f"missing summary {path}")
        text = path.read_text().strip()
        if (DETAILS / f"{name}.md").exists() and f"results/{name}.md" not in text:
            raise SystemExit(f"{path} does not link its detail page results/{name}.md")
        parts.append(demote_headings(text) + "\n")
    extra = sorted(p.stem for p in SUMMARIES.glob("*.md") if p.stem not in ORDER)
    if extra:
        raise SystemExit(f"summaries not in ORDER: {', '.join(extra)}")
    page = "\n\n".join(parts)
    lines = page.count("\n")
    if lines > MAX_LINES:
        raise SystemExit(f"the page would have {lines} lines, more than {MAX_LINES}: shorten a summary "
                         f"(detail tables belong on the detail pages)")
    return page


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/results.md is not up to date")
    args = ap.parse_args()
    page = build()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != page:
            print(f"{PAGE} is not up to date: run python docs/build_results.py", file=sys.stderr)
            sys.exit(1)
        return
    PAGE.write_text(page)
    print(f"wrote {PAGE} ({page.count(chr(10))} lines) from {len(ORDER)} sections")


if __name__ == "__main__":
    main()
