"""Write docs/results/bad_inputs.md: every bad input and injected fault the tests try.

The rows come from the tests themselves (pytest's collection of their parameters), so the
page lists exactly what CI checks::

    python -m docs.results.bad_inputs.page
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
BAD_INPUTS = ["tests/test_bad_inputs.py", "tests/test_bad_inputs_users.py"]
FAULTS = ["tests/test_kill_points.py", "tests/test_resume.py", "tests/test_exit_codes.py", "tests/test_faults.py",
          "tests/training/test_retrain_resume.py", "tests/test_nan_loss.py", "tests/strategies/test_cost_aware.py",
          "tests/strategies/test_darts_resume.py", "tests/strategies/test_car_darts_resume.py",
          "tests/strategies/test_latent_bo.py", "tests/strategies/test_graph_vae_strategy.py",
          "tests/strategies/test_graph_vae_resume.py", "tests/strategies/test_mechanism_search.py",
          "tests/comparison/test_compare.py", "tests/scale/test_parallel.py", "tests/scale/test_ray_faults.py",
          "tests/scale/test_distributed.py", "tests/scale/test_distributed_launch.py"]
#: A test of those files is a fault test when its name holds one of these ...
FAULT_WORDS = ("kill", "resume", "interrupt", "sigint", "fault", "nan", "ctrl", "crash", "half_done", "damaged",
               "dying", "every_rank", "gone")
#: ... or when it is in one of these files (a NaN loss in each strategy, named by the strategy).
ALL_FAULTS = ("tests/test_nan_loss.py",)


class _Collect:
    def __init__(self) -> None:
        self.items: list = []

    def pytest_collection_modifyitems(self, items) -> None:  # noqa: D401 - a pytest hook
        self.items = list(items)


def _collect(paths: list[str]) -> list:
    plugin = _Collect()
    pytest.main(["--collect-only", "-q", "-p", "no:warnings", *paths], plugins=[plugin])
    return plugin.items


def _cell(value: object) -> str:
    text = value.__name__ if callable(value) and getattr(value, "__name__", "") != "<lambda>" else repr(value)
    if callable(value) and getattr(value, "__name__", "") == "<lambda>":
        text = "(built by the test)"
    return text.replace("|", "\\|").replace("\n", " ")[:90]


def _doc(item) -> str:
    doc = inspect.getdoc(item.function) or item.function.__name__.replace("test_", "").replace("_", " ")
    return doc.splitlines()[0]


def main() -> None:
    items = _collect(BAD_INPUTS)
    lines = ["# Bad inputs and faults: what attnas does with them", "",
             f"Every row is a test case of {' and '.join(f'`{p}`' for p in BAD_INPUTS)} (collected by "
             "`python -m docs.results.bad_inputs.page`). Each bad input runs the command line and checks: exit "
             "status 2, exactly one line `error: ...` that contains the message shown, and no run directory "
             "written (a run directory given is left as it was). The rows whose line says \"(see the test)\" are "
             "valid inputs users produce (float64 features, YAML 1.2 numbers, UTF-16 files) that must succeed, and "
             "SIGTERM and a second Ctrl-C, which stop a run as Ctrl-C does (exit 143 or 130, the run marked "
             "interrupted, then resumed).", "",
             "| # | test | input | the one line says |", "|---|---|---|---|"]
    n = 0
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        message = params.get("message", "")
        case = ", ".join(f"{k}={_cell(v)}" for k, v in params.items() if k != "message")
        if "(built by the test)" in case:  # the input is made by a function: its test id names it
            case = item.callspec.id
        n += 1
        lines.append(f"| {n} | {_doc(item)} | {case.replace('`', '') or '-'} | "
                     f"{_cell(message) if message else '(see the test)'} |")
    faults = [i for i in _collect(FAULTS) if any(w in i.name for w in FAULT_WORDS) or i.nodeid.startswith(ALL_FAULTS)]
    lines += ["", f"{n} bad inputs.", "", "## Faults injected", "",
              "Each test kills, interrupts or breaks a run at the point named (a SIGKILL after an event or "
              "between files, Ctrl-C, a NaN loss, a damaged checkpoint, a Ray worker, a Ray head or a "
              "distributed rank that dies or fails) and checks that it resumes to the same result as an "
              "uninterrupted run, or stops with one line and resumes (nothing finished is lost).", "",
              "| # | test |", "|---|---|"]
    lines += [f"| {k} | `{i.nodeid}` |" for k, i in enumerate(faults, 1)]
    (HERE.parent / "bad_inputs.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {HERE.parent / 'bad_inputs.md'}: {n} bad inputs, {len(faults)} fault tests")


if __name__ == "__main__":
    main()
