"""Fill the fault and bad-input tables of ``docs/results/scaleout.md`` from a real test run.

Runs the tests listed below with ``pytest --junitxml`` (or reads a JUnit file given with
``--junit``) and writes, between the ``<!-- NAME:begin -->`` / ``<!-- NAME:end -->`` markers
of the page, one row per test case: the test, what it checks, and its result (``pass``,
``FAIL``, ``error`` or ``skipped: reason``), with the load average and the time of the run.

Usage (from the repository root)::

    ATTNAS_DATA=/work/shared/data ATTNAS_PROGRESS=0 PYTHONPATH=. python -m docs.results.scaleout.tables
    python -m docs.results.scaleout.tables --junit junit.xml [more.xml]   # from earlier runs
    python -m docs.results.scaleout.tables --print                # to stdout, page untouched
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "results" / "scaleout.md"

# (test node id without parameters, what it checks); every case of a parametrised test gets a row.
FAULTS = [
    ("tests/test_resume.py::test_killed_search_resumes_to_the_same_result",
     "search SIGKILLed after the n-th event of a phase (supernet training, evolution, re-ranking, final "
     "training), resumed with `attnas search --resume`: same arch.json, metrics and events as an "
     "uninterrupted run"),
    ("tests/test_resume.py::test_resume_of_a_finished_run_is_a_no_op",
     "resuming a finished run changes nothing"),
    ("tests/strategies/test_darts_resume.py::test_killed_darts_search_resumes_to_the_same_result",
     "DARTS search SIGKILLed during an epoch (darts:3: after a checkpoint; darts:2: before the first "
     "one), resumed: same arch.json, metrics, per-epoch losses and alpha as an uninterrupted run"),
    ("tests/test_faults.py::test_damaged_newest_checkpoint_falls_back_to_the_previous_one",
     "newest supernet checkpoint truncated / one bit flipped / replaced by a pickle with a valid "
     "checksum: detected, warning naming the file, the previous checkpoint is used (no code runs), "
     "same arch.json and metrics as an uninterrupted run"),
    ("tests/runs/test_run_dir.py::test_checkpoint_round_trip_and_corruption",
     "checkpoint file: checksum detects truncation and corruption"),
    ("tests/runs/test_run_dir.py::test_checkpoints_refuse_code",
     "checkpoint holding a pickled object is refused (`weights_only=True`)"),
    ("tests/runs/test_run_dir.py::test_run_dir_fallback_keep_and_rewind",
     "run directory falls back to the previous good checkpoint and rewinds the events to it"),
    ("tests/test_faults.py::test_unwritable_run_directory_fails_before_any_work",
     "run directory under a file / on a read-only file system / without write permission: "
     "`RunDirError` naming it before the task or space is built (search, sweep and CLI exit 2)"),
    ("tests/test_faults.py::test_resume_and_retrain_of_a_read_only_run_fail_before_any_work",
     "resume / retrain of a read-only run directory fail before any work"),
    ("tests/scale/test_parallel.py::test_killed_ray_worker_is_rerun_with_the_same_result",
     "a Ray worker SIGKILLs itself while scoring candidates: the chunk is re-run in a fresh worker and the "
     "search ends with the sequential run's candidates, scores, arch.json and metrics"),
    ("tests/scale/test_parallel.py::test_killed_search_resumed_with_other_workers",
     "search killed during evolution (sequential), resumed on 2 Ray workers: same result"),
]

BAD_INPUTS = [
    ("tests/test_bad_inputs.py::test_bad_recipe_values",
     "recipe with an unknown key / wrong type / invalid choice: exit 2, one line naming the key, nothing written"),
    ("tests/test_bad_inputs.py::test_malformed_recipe_files",
     "malformed YAML, non-mapping or incomplete recipe: exit 2, one line (with the YAML line), nothing written"),
    ("tests/test_bad_inputs.py::test_bad_architecture_files",
     "Arch JSON with an unknown operation / out-of-range source layer / violated constraint: "
     "`check-arch` and `search` (fixed strategy) exit 2 naming layer and input, nothing written"),
    ("tests/test_bad_inputs.py::test_malformed_architecture_documents",
     "Arch document: malformed JSON, unknown key, other space, NaN"),
    ("tests/test_bad_inputs.py::test_bad_graph_files",
     "graph file: mismatched y rows, NaN features, labels out of range, edge to a missing node, "
     "overlapping masks: exit 2 naming the problem, nothing written"),
    ("tests/test_bad_inputs.py::test_bad_csv_text_files",
     "CSV text dataset: unknown label, empty text, wrong field count, missing column"),
    ("tests/test_bad_inputs.py::test_bad_sst_trees",
     "SST trees: sentiment label out of range, unclosed tree (file and line named)"),
    ("tests/test_bad_inputs.py::test_bad_cifar10_batches",
     "CIFAR-10 batches: label out of range, fewer labels than images, wrong image shape, NaN pixels"),
    ("tests/test_bad_inputs.py::test_bad_image_folders",
     "image folder: images of different sizes, NaN / out-of-range float images, wrong array shape"),
    ("tests/test_bad_inputs.py::test_space_without_networks_for_the_task",
     "a task kind the space has no networks for: refused before anything is written"),
    ("tests/test_bad_inputs.py::test_model_file_with_a_pickled_object_is_refused",
     "model.pt with a pickled object and a valid checksum: refused by `weights_only=True`, no code runs"),
    ("tests/test_fuzz.py::test_arch_parser_raises_only_arch_error_and_round_trips",
     "hypothesis: any JSON document given to the Arch parser gives an Arch or an `ArchError`"),
    ("tests/test_fuzz.py::test_arch_text_parser_raises_only_arch_error",
     "hypothesis: any text given to the Arch parser gives an Arch or an `ArchError`"),
    ("tests/test_fuzz.py::test_deeply_nested_arch_text_is_an_arch_error",
     "deeply nested JSON is an `ArchError`, not a `RecursionError`"),
    ("tests/test_fuzz.py::test_space_validation_raises_only_arch_error",
     "hypothesis: mutated architectures of every space give `ArchError` only"),
    ("tests/test_fuzz.py::test_config_loader_raises_only_config_error",
     "hypothesis: a recipe with one value replaced gives a config or a `ConfigError`"),
    ("tests/test_fuzz.py::test_config_loader_on_any_document",
     "hypothesis: any YAML-like document gives a config or a `ConfigError`"),
    ("tests/test_fuzz.py::test_set_overrides_raise_only_config_error",
     "hypothesis: any `--set` overrides give a config or a `ConfigError`"),
    ("tests/scale/test_parallel.py::test_bad_sweep_writes_nothing",
     "sweep with bad options: clear error, nothing written"),
    ("tests/scale/test_parallel.py::test_bad_or_unreachable_ray_address_fails_fast",
     "malformed or unreachable `--ray-address`: clear error before any work"),
    ("tests/scale/test_parallel.py::test_workers_without_ray_name_the_extra",
     "`--workers 2` without Ray installed: error naming `pip install \"attnas[ray]\"`"),
    ("tests/scale/test_distributed.py::test_shard_of_a_stream_and_its_errors",
     "data-parallel run with fewer training batches than processes: `ConfigError` naming the batch size"),
]

TABLES = {"FAULT_TABLE": FAULTS, "BAD_INPUT_TABLE": BAD_INPUTS}


def run_pytest(node_ids: list[str], junit: Path) -> None:
    """Run the tests into a JUnit file."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *node_ids]
    env = dict(os.environ, ATTNAS_PROGRESS="0")
    subprocess.run(cmd, cwd=ROOT, env=env, check=False)


def read_junit(junit: Path) -> dict[str, list[tuple[str, str]]]:
    """``{test node id without parameters: [(case name, result)]}`` from a JUnit file."""
    cases: dict[str, list[tuple[str, str]]] = {}
    for case in ET.parse(junit).iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        name = case.get("name", "")
        base = name.split("[", 1)[0]
        if case.find("failure") is not None:
            result = "FAIL"
        elif case.find("error") is not None:
            result = "error"
        elif (skip := case.find("skipped")) is not None:
            result = f"skipped: {(skip.get('message') or '').strip()[:80]}"
        else:
            result = "pass"
        cases.setdefault(f"{module}::{base}", []).append((name, result))
    return cases


def table(tests: list[tuple[str, str]], cases: dict) -> str:
    rows = ["| test | what it checks | result |", "|---|---|---|"]
    for node, what in tests:
        found = cases.get(node)
        file = node.split("::")[0]
        if not found:
            rows.append(f"| `{node.split('::')[1]}` ({file}) | {what} | not run |")
            continue
        for i, (name, result) in enumerate(found):
            label = name.replace("|", "\\|").replace("\n", " ")
            rows.append(f"| `{label}` ({file}) | {what if i == 0 else '(same test, another case)'} | {result} |")
    return "\n".join(rows)


def fill(page: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{body}\n{end}"
    if begin in page:
        return re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, page, flags=re.S)
    if name not in page:
        raise SystemExit(f"{PAGE}: neither the placeholder {name} nor its markers")
    return page.replace(name, block, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--junit", type=Path, nargs="+",
                    help="read these JUnit files (a later file's result of a case wins) instead of running the tests")
    ap.add_argument("--print", action="store_true", help="print the tables instead of editing the page")
    args = ap.parse_args()
    nodes = [n for tests in TABLES.values() for n, _ in tests]
    if args.junit:
        junits = args.junit
    else:
        junits = [Path(tempfile.mkdtemp(prefix="scaleout-")) / "junit.xml"]
        run_pytest(nodes, junits[0])
    seconds = sum(float(ts.get("time", 0)) for j in junits for ts in ET.parse(j).getroot().iter("testsuite"))
    cases: dict[str, list[tuple[str, str]]] = {}
    for junit in junits:
        for node, found in read_junit(junit).items():
            merged = dict(cases.get(node, []))
            merged.update(found)
            cases[node] = list(merged.items())
    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(max(j.stat().st_mtime for j in junits)))
    counts: dict[str, int] = {}
    page = PAGE.read_text()
    for name, tests in TABLES.items():
        body = table(tests, cases)
        for line in body.splitlines()[2:]:
            result = line.rsplit("|", 2)[-2].strip().split(":")[0]
            counts[result] = counts.get(result, 0) + 1
        note = f"Run of {stamp} ({seconds:.0f} s of pytest), load average when the tables were written {load} (2 cores).\n\n"
        page = fill(page, name, note + body)
        if args.print:
            print(f"## {name}\n\n{note}{body}\n")
    if not args.print:
        PAGE.write_text(page)
    print("results:", ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), file=sys.stderr)


if __name__ == "__main__":
    main()
