"""Assemble docs/results.md from the per-method files in docs/results/.

Each method's measured results live in their own file (written with the code that made
them); this script concatenates them, in a fixed order, under a common preamble, so
docs/results.md is the one page to read. Run it after editing any of them::

    python docs/build_results.py
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ["autoattend_graph", "autoattend_text", "dartformer", "autola", "fullattn", "opemb", "scaleout", "kernels"]
PREAMBLE = """# Measured results

Every figure on this page was measured with attnas on the machines this project runs
on, and the command that produced it stands next to it. Where a result misses the
paper's, the miss is reported with what we know of its cause. Unless a section says
otherwise the machine is a 2-core CPU box shared with other jobs, so each timing carries
the load average at the time; speed targets are ratios measured within one run.

This page is assembled by `python docs/build_results.py` from the files in
`docs/results/`, one per method.
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


def main() -> None:
    parts = [PREAMBLE]
    files = {p.stem: p for p in (HERE / "results").glob("*.md")}
    for name in ORDER + sorted(set(files) - set(ORDER)):
        if name in files:
            parts.append(demote_headings(files[name].read_text().strip()) + "\n")
    (HERE / "results.md").write_text("\n\n".join(parts))
    print(f"wrote {HERE / 'results.md'} from {len(parts) - 1} sections")


if __name__ == "__main__":
    main()
