"""Run an ``attnas`` command line in a child forked from a process that has imported attnas.

A new Python spends about 7 s of CPU importing torch, torch_geometric and attnas before a
command starts; the tests that kill a run and resume it start dozens of such children. A
``multiprocessing`` fork server (one per pytest process, started at its first use) imports
them once (:mod:`forked_preload`); each child is forked from it, so it is a process of its
own (it can be SIGKILLed, its exit status is its own) that starts at once. The server has
never run a command, so a child starts as fresh as ``python -m attnas`` does.

Not the same as a new Python, so these children are used only where that makes no
difference; elsewhere :func:`start_forked` returns ``None`` and :func:`run_child` starts a new
Python:
- for a command line other than ``python -m attnas ...`` or ``python -c CODE ...``;
- for the commands that start Ray (``--workers``, ``--address``): the child's exit does not
  run Ray's shutdown;
- when the child's environment differs from the server's in a variable that is read when a
  module is imported (anything outside :data:`READ_AT_RUN_TIME`).

Not a test module: imported by :mod:`attnas_subprocess`.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile

#: Environment variables attnas and the tests' children read when a command runs (not at
#: import): a child may set them to other values than the fork server had.
READ_AT_RUN_TIME = frozenset({
    "ATTNAS_FAULT", "ATTNAS_PROGRESS", "ATTNAS_DATA", "ATTNAS_KERNEL_CACHE", "ATTNAS_THREADS", "ATTNAS_DEBUG",
    "ATTNAS_MALLOC", "XDG_CACHE_HOME", "PYTEST_CURRENT_TEST",
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",  # torch.distributed's, at its start
    "PYTHONBREAKPOINT",  # read when breakpoint() runs; ray.init sets it in its driver
})
#: Prefixes of variables read at run time too: Ray's (``ray.init`` writes several into its
#: driver's environment, e.g. a test's local Ray; the fork server imports no Ray).
READ_AT_RUN_TIME_PREFIXES = ("RAY_",)

#: Options that start a Ray.
_RAY_OPTIONS = ("--workers", "--address")

_context = None
_server_env: dict[str, str] = {}


def _fork_context():
    """The fork-server context, its server started (it imports :mod:`forked_preload`) with
    this process's environment; ``None`` when another fork server of this process runs."""
    global _context, _server_env
    if _context is None:
        from multiprocessing import forkserver

        if forkserver._forkserver._forkserver_pid is not None:  # started by someone else, environment unknown
            return None
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(["forked_preload"])
        _server_env = dict(os.environ)
        # Python 3.11's server does not take this process's sys.path: it finds this folder by PYTHONPATH
        here = os.path.dirname(os.path.abspath(__file__))
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, _server_env.get("PYTHONPATH")) if p)
        try:
            forkserver.ensure_running()
        finally:
            if "PYTHONPATH" in _server_env:
                os.environ["PYTHONPATH"] = _server_env["PYTHONPATH"]
            else:
                del os.environ["PYTHONPATH"]
    return _context


def why_not_forked(env: dict[str, str]) -> str:
    """Why :func:`start_forked` would start a new Python for ``env`` (for a test's message)."""
    if _fork_context() is None:
        return "another fork server runs in this process"
    keys = sorted(k for k in _import_time_keys(env) if env.get(k) != _server_env.get(k))
    return f"the environment differs from the fork server's in {keys}" if keys else "the command line is not forkable"


def _same_at_import(env: dict[str, str]) -> bool:
    """Whether ``env`` and the fork server's environment agree outside :data:`READ_AT_RUN_TIME`."""
    return all(env.get(k) == _server_env.get(k) for k in _import_time_keys(env))


def _import_time_keys(env: dict[str, str]) -> set[str]:
    """The variables of ``env`` or the fork server's that a module may read when it is imported."""
    keys = (set(env) | set(_server_env)) - READ_AT_RUN_TIME
    return {k for k in keys if not k.startswith(READ_AT_RUN_TIME_PREFIXES)}


def _child(command: list[str], env: dict[str, str], cwd: str, out_path: str, err_path: str) -> None:
    """In the forked child: ``command`` as the new Python would run it, its output to the two files."""
    import runpy
    import signal
    import traceback

    for fd, path in ((1, out_path), (2, err_path)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    code = 0
    try:
        if command[1] == "-m":
            sys.argv = [command[2], *command[3:]]
            runpy.run_module(command[2], run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *command[3:]]
            exec(compile(command[2], "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:  # what Python prints for an uncaught exception
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:  # Python ends an uncaught KeyboardInterrupt with the signal itself
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


class ForkedChild:
    """A started forked child, waited on like a ``subprocess.Popen`` with its output piped as text."""

    def __init__(self, context, command: list[str], env: dict[str, str]):
        self.args = command
        self._folder = tempfile.TemporaryDirectory(prefix="attnas-child-")
        self._out, self._err = (os.path.join(self._folder.name, name) for name in ("stdout", "stderr"))
        self._process = context.Process(target=_child, args=(command, env, os.getcwd(), self._out, self._err))
        self._process.start()
        self.pid = self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def kill(self) -> None:
        self._process.kill()

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._process.exitcode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for the end (``TimeoutExpired`` after ``timeout`` seconds, the child left running);
        its stdout and stderr."""
        self.wait(timeout)
        out, err = _text(self._out), _text(self._err)
        self._folder.cleanup()
        return out, err

    def run(self, timeout: float) -> subprocess.CompletedProcess:
        """Wait for the end like ``subprocess.run(..., capture_output=True, text=True, timeout=timeout)``.

        Raises:
            subprocess.TimeoutExpired: The child ran longer than ``timeout`` seconds (it is killed).
        """
        try:
            out, err = self.communicate(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.communicate()
            raise
        return subprocess.CompletedProcess(self.args, self.returncode, out, err)


def start_forked(command: list[str], env: dict[str, str]) -> ForkedChild | None:
    """Start ``command`` (``[python, "-m", "attnas", ...]`` or ``[python, "-c", CODE, ...]``)
    with ``env`` in a forked child.

    Returns:
        The running child, or ``None`` where a forked child would not be the same as a new
        Python (see the module docstring): start ``command`` as a subprocess then.
    """
    if len(command) < 3 or command[0] != sys.executable or command[1:3] != ["-m", "attnas"] and command[1] != "-c":
        return None
    if any(arg == opt or arg.startswith(opt + "=") for arg in command[3:] for opt in _RAY_OPTIONS):
        return None
    context = _fork_context()
    if context is None or not _same_at_import(env):
        return None
    return ForkedChild(context, command, env)


def run_child(command: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """``subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)``, the
    child forked (:func:`start_forked`) where it would be the same as a new Python.

    Raises:
        subprocess.TimeoutExpired: The child ran longer than ``timeout`` seconds (it is killed).
    """
    child = start_forked(command, env)
    if child is None:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return child.run(timeout)


def _text(path: str) -> str:
    """The file's text; empty when the child ended before it opened it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""
