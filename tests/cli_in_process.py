"""Run the ``mainspring`` command line inside the test process, as a subprocess would.

Starting ``python -m mainspring`` costs about half a second (more under coverage), and
most command-line tests only look at the exit code and the output. :func:`run_cli`
calls :func:`mainspring.cli.main` with what a child process would have had:

- the environment ``env`` (it replaces ``os.environ`` for the call);
- ``env["PYTHONPATH"]``'s entries in front of ``sys.path``; the modules imported from
  them are forgotten afterwards, so a plugin module that the next test writes under the
  same name is imported afresh;
- standard input from ``/dev/null``, or from a file holding ``stdin`` (so the command
  reads it as it reads a pipe or a redirected file); standard output and error captured;
- the working directory ``cwd``.

All of it, and the ``mainspring`` logger the command configures, is restored afterwards.
What needs a real process (a terminal, a signal, a pipe closed by ``head``, an
interpreter started without site-packages, the console script itself) stays a
subprocess in its test.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from mainspring.cli import main

__all__ = ["run_cli"]


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _import_path(env: Mapping[str, str]) -> Iterator[None]:
    """``PYTHONPATH`` in front of ``sys.path``; modules imported from it forgotten after."""
    added = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    added = [entry for entry in added if entry not in sys.path]
    roots = tuple(str(Path(entry).resolve()) + os.sep for entry in added)
    saved_path = list(sys.path)
    before = set(sys.modules)
    sys.path[:0] = added
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules.get(name), "__file__", None) or ""
            if roots and str(Path(origin).resolve()).startswith(roots):
                del sys.modules[name]


@contextlib.contextmanager
def _standard_input(text: str | None) -> Iterator[None]:
    saved = sys.stdin
    with contextlib.ExitStack() as stack:
        if text is None:
            sys.stdin = stack.enter_context(open(os.devnull))
        else:
            file = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
            file.write(text)
            file.seek(0)
            sys.stdin = file
        try:
            yield
        finally:
            sys.stdin = saved


@contextlib.contextmanager
def _logger_kept() -> Iterator[None]:
    logger = logging.getLogger("mainspring")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def run_cli(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    stdin: str | None = None,
    cwd: Path | str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``mainspring ARGS`` run in this process (see the module); its exit code and output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_environment(env))
        stack.enter_context(_import_path(env))
        stack.enter_context(_standard_input(stdin))
        stack.enter_context(_logger_kept())
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            code = main(list(args))
        except SystemExit as leaving:  # argparse's usage errors, --version, --help
            code = (
                leaving.code if isinstance(leaving.code, int) else 0 if leaving.code is None else 1
            )
            if isinstance(leaving.code, str):
                print(leaving.code, file=sys.stderr)
    return subprocess.CompletedProcess(["mainspring", *args], code, out.getvalue(), err.getvalue())
