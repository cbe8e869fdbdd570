"""Shared test fixtures: a program on a pseudo-terminal, as a person at a keyboard runs it.

Also the session summary of the reliability suite, gathered from every pytest-xdist worker.
"""

from __future__ import annotations

import codecs
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mainspring.providers.keys import forget_api_keys


def _controlling_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty (so ^C is SIGINT)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A child process on a pseudo-terminal, read until expected text appears.

    ``screen`` is everything the program wrote; :meth:`display` is what a terminal of
    ``ROWS`` x ``COLUMNS`` shows after it (cursor movements and erasing applied).
    """

    ROWS, COLUMNS = 60, 100

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        size = struct.pack("HHHH", self.ROWS, self.COLUMNS, 0, 0)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
        self.process = subprocess.Popen(
            args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
            preexec_fn=_controlling_terminal,
        )
        os.close(slave)
        self.screen = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def expect(self, text: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{text!r} not seen; screen so far:\n{self.screen}")
            if not self._read(remaining):
                break

    def _read(self, timeout: float) -> bool:
        """Add what the program writes within ``timeout`` to ``screen``; ``False`` once
        the terminal is closed."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                self.screen += self._decoder.decode(os.read(self.master, 4096))
            except OSError:
                return False
        return True

    def display(self) -> list[str]:
        """The lines the terminal shows now, without trailing blanks."""
        import pyte

        screen = pyte.Screen(self.COLUMNS, self.ROWS)
        pyte.Stream(screen).feed(self.screen)
        return [line.rstrip() for line in screen.display]

    def expect_shown(self, text: str, timeout: float = 15.0) -> None:
        """Read until ``text`` is on the displayed screen (not only in the bytes)."""
        self.until(lambda: text in "\n".join(self.display()), repr(text), timeout)

    def until(self, condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
        """Read until ``condition()`` holds; fail naming ``what`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                shown = "\n".join(self.display()).rstrip()
                raise AssertionError(f"{what} not shown; the terminal shows:\n{shown}")
            if not self._read(remaining):
                break

    def at_prompt(self, prompt: str = ">", timeout: float = 15.0) -> None:
        """Read until the last line shown is ``prompt`` and nothing after it."""

        def ready() -> bool:
            lines = [line for line in self.display() if line]
            return bool(lines) and lines[-1] == prompt

        self.until(ready, f"the prompt {prompt!r}", timeout)

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> int:
        return self.process.wait(timeout=15)


@pytest.fixture(autouse=True)
def _data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's own data directory: conversations the CLI keeps land there, not in ~."""
    monkeypatch.setenv("MAINSPRING_DATA_DIR", str(tmp_path_factory.mktemp("data")))


PLUGIN_CONTROLS = (
    "MAINSPRING_PLUGINS",
    "MAINSPRING_DISABLE_PLUGINS",
    "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD",
)
"""The environment variables that choose which plugins load (see docs/plugins.md)."""


@pytest.fixture(autouse=True)
def _plugin_controls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no plugin controls from the environment it runs in."""
    for name in PLUGIN_CONTROLS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _api_keys() -> Iterator[None]:
    """Each test reads API keys afresh: none taken by an earlier test is kept."""
    forget_api_keys()
    yield
    forget_api_keys()


@pytest.fixture
def pty_terminal() -> type[Terminal]:
    """The :class:`Terminal` class: ``pty_terminal(args, env)`` starts a program on a pty."""
    return Terminal


_WORKER_FIGURES: list[dict[str, float]] = []
"""The reliability figures each pytest-xdist worker reported when it finished."""


def _own_figures() -> dict[str, float] | None:
    harness = sys.modules.get("reliability_harness")
    return None if harness is None else dict(harness.FIGURES)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand this process's reliability figures to the controller."""
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    figures = _own_figures()
    if workeroutput is not None and figures is not None:
        workeroutput["reliability_figures"] = figures


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    figures = getattr(node, "workeroutput", {}).get("reliability_figures")
    if figures:
        _WORKER_FIGURES.append(figures)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line: agent runs checked, runs aborted, the longest settle after ``abort()``."""
    parts = [*_WORKER_FIGURES, *filter(None, [_own_figures()])]
    runs = sum(part["runs"] for part in parts)
    if not runs:
        return
    aborted = sum(part["aborted_runs"] for part in parts)
    settle_ms = max(part["max_settle_s"] for part in parts) * 1000
    terminalreporter.write_line(
        f"reliability: {runs:.0f} agent runs checked, {aborted:.0f} aborted; "
        f"longest settle after abort(): {settle_ms:.1f} ms"
    )
