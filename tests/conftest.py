"""Shared test fixtures: a program on a pseudo-terminal, as a person at a keyboard runs it."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import termios
import time

import pytest


def _controlling_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty (so ^C is SIGINT)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A child process on a pseudo-terminal, read until expected text appears."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
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

    def expect(self, text: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{text!r} not seen; screen so far:\n{self.screen}")
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    self.screen += os.read(self.master, 4096).decode(errors="replace")
                except OSError:
                    break

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> int:
        return self.process.wait(timeout=15)


@pytest.fixture(autouse=True)
def _data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's own data directory: conversations the CLI keeps land there, not in ~."""
    monkeypatch.setenv("MAINSPRING_DATA_DIR", str(tmp_path_factory.mktemp("data")))


@pytest.fixture
def pty_terminal() -> type[Terminal]:
    """The :class:`Terminal` class: ``pty_terminal(args, env)`` starts a program on a pty."""
    return Terminal
