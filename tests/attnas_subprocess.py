"""Run the ``attnas`` command line in a child process, optionally killed by a fault.

Shared by the tests that kill a run with SIGKILL (after an event, ``ATTNAS_FAULT=<phase>:<n>``,
or as a file is replaced, :func:`killed_at_replace`) and resume it; the uninterrupted
reference and the resume can run in the test's own process instead (:func:`search_here`,
:func:`resume_here`: no child's start-up of seconds). Not a test module:
imported as ``from attnas_subprocess import run_attnas`` (``tests/`` is on ``sys.path``
because it holds ``conftest.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys

from forked_attnas import run_child


def run_attnas(*args: str, fault: str | None = None, check: bool = True, threads: int | None = 1,
               timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m attnas [--threads N] ARGS`` with progress bars off.

    The child is forked from a process that has imported attnas already
    (:func:`forked_attnas.run_child`) where that is the same, else started as a new
    Python.

    Args:
        fault: ``ATTNAS_FAULT`` for the child (e.g. ``"supernet:17"``); any inherited one is dropped.
        check: Raise with the child's stderr when it exits non-zero.
        threads: ``--threads`` for the child (``None``: the command line's default). CPU
            results are bit-identical only for the same thread count.
    """
    env = dict(os.environ, ATTNAS_PROGRESS="0")
    env.pop("ATTNAS_FAULT", None)
    if fault:
        env["ATTNAS_FAULT"] = fault
    flags = ["--threads", str(threads)] if threads is not None else []
    command = [sys.executable, "-m", "attnas", *flags, *args]
    proc = run_child(command, env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"attnas {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


#: Runs ``attnas ARGS`` and SIGKILLs itself when a file named NAME (``*.ckpt``: any
#: checkpoint) is about to replace its old version for the COUNT-th time: the new file is
#: whole under its temporary name, the old one still in place.
KILL_AT_REPLACE = """
import os, signal, sys
name, count, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
real, seen = os.replace, [0]
def replace(src, dst):
    base = os.path.basename(str(dst))
    if base == name or (name == "*.ckpt" and base.endswith(".ckpt")):
        seen[0] += 1
        if seen[0] == count:
            os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst)
os.replace = replace
sys.argv = ["attnas", *args]
from attnas.cli import main
main()
"""


def killed_at_replace(name: str, count: int, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``attnas --threads 1 ARGS``, SIGKILLed as the COUNT-th replacement of a file NAME begins.

    Args:
        name: The base name of the file (``*.ckpt``: any checkpoint).
        count: Which replacement of such a file kills (1: the first).
    """
    env = dict(os.environ, ATTNAS_PROGRESS="0")
    env.pop("ATTNAS_FAULT", None)
    command = [sys.executable, "-c", KILL_AT_REPLACE, name, str(count), "--threads", "1", *args]
    return run_child(command, env, timeout=timeout)


def recipe_file(folder, base: dict, **strategy) -> tuple[dict, str]:
    """``base`` with the ``strategy`` sections given replaced, written to ``folder/recipe.yaml``.

    Returns:
        ``(recipe, path)``: the mapping, and the path to hand the command line.
    """
    import yaml

    recipe = {**base, "strategy": {**base["strategy"], **strategy}}
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return recipe, str(path)


def search_reference(folder, recipe: dict, threads: int | None = 1) -> tuple:
    """Write ``recipe`` to ``folder/tiny.yaml`` and run an uninterrupted search of it.

    Returns:
        ``(recipe_path, run_dir)``: what a killed-and-resumed run is compared with.
    """
    import yaml

    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run_attnas("search", str(path), "--out", str(folder / "run"), threads=threads)
    return path, folder / "run"


#: A run of seconds: a fixed GCN on the digits graph (no download), trained for two epochs.
FIXED_GCN = {
    "name": "fixed-gcn",
    "task": {"name": "node-classification", "dataset": "digits-graph"},
    "space": {"name": "gnn-baseline"},
    "strategy": {"name": "fixed", "arch": {"model": "gcn"}},
    "retrain": {"epochs": 2, "patience": 0},
}


#: Warning categories a child's stderr does not show (Python's default filter).
_HIDDEN_IN_A_CHILD = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def resume_here(run_dir, threads: int, **kwargs) -> list[str]:
    """``attnas.pipeline.resume(run_dir)`` in this process, with torch on ``threads`` meanwhile.

    What ``attnas search --resume RUN_DIR`` runs, without a child's seconds of start-up. A
    resume refuses another thread count than the killed run's (``run.json``), so give the
    ``--threads`` of the killed child.

    Returns:
        The messages of the warnings a child would have printed on stderr (every warning of
        the resume, less those Python's default filter hides).
    """
    import warnings

    import torch

    from attnas import pipeline

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pipeline.resume(run_dir, **kwargs)
    finally:
        torch.set_num_threads(before)
    return [str(w.message) for w in caught if not issubclass(w.category, _HIDDEN_IN_A_CHILD)]


def search_here(folder, recipe: dict, threads: int, **kwargs) -> tuple:
    """:func:`search_reference` in this process (torch on ``threads`` meanwhile): the same
    result as a child given ``--threads threads``, without its start-up."""
    import torch
    import yaml

    from attnas import pipeline

    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(recipe))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        pipeline.search(path, out=folder / "run", **kwargs)
    finally:
        torch.set_num_threads(before)
    return path, folder / "run"
