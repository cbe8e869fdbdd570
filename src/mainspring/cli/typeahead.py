"""Keys typed on the terminal while ``chat`` streams a reply: kept apart from the reply.

While :class:`TypeAhead` is started, the terminal does not echo what is typed (so keys
never land in the middle of the streamed text) and is not line-buffered; Ctrl-C still
interrupts (``SIGINT``), without discarding what was typed before it. Printable keys
collect into a line (Backspace deletes, Ctrl-U clears, escape sequences such as the arrow
keys are dropped); Enter hands the line to ``on_line``. ``on_change`` is told the line as
it grows, to show it apart. What is typed but not sent is :attr:`pending` (``chat`` puts
it into the next prompt). Only for a terminal on POSIX.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import termios
from collections.abc import Callable
from typing import Any

__all__ = ["TypeAhead"]

_ESCAPE = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|O.|.)?", re.DOTALL)
"""A terminal escape sequence (CSI, SS3, or ESC and one key), bracketed paste included."""


class TypeAhead:
    """Collects the keys typed on the terminal ``fd`` (see the module docstring)."""

    def __init__(
        self,
        fd: int,
        on_line: Callable[[str], None],
        on_change: Callable[[str], None] | None = None,
    ) -> None:
        self.fd = fd
        self.on_line = on_line
        self.on_change = on_change or (lambda text: None)
        self.pending = ""
        self._saved: list[Any] | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def started(self) -> bool:
        """Whether keys are being collected now."""
        return self._saved is not None

    def start(self) -> None:
        """Turn echo and line buffering off and collect keys (no-op when started)."""
        if self._saved is not None:
            return
        saved = termios.tcgetattr(self.fd)
        quiet = termios.tcgetattr(self.fd)
        quiet[3] &= ~(termios.ECHO | termios.ICANON)  # ISIG stays: Ctrl-C interrupts
        quiet[3] |= termios.NOFLSH  # and keeps what was typed before it
        quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
        termios.tcsetattr(self.fd, termios.TCSANOW, quiet)
        self._saved = saved
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._readable)

    def stop(self) -> None:
        """Give the terminal back as it was (no-op when not started); :attr:`pending` stays."""
        if self._saved is None:
            return
        if self._loop is not None:
            self._loop.remove_reader(self.fd)
        with contextlib.suppress(termios.error):
            termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)
        self._saved = None

    def take(self) -> str:
        """:attr:`pending`, now cleared."""
        text, self.pending = self.pending, ""
        return text

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 4096)
        except OSError:
            self.stop()
            return
        self.feed(self._decoder.decode(data))

    def feed(self, text: str) -> None:
        """Take ``text`` as typed keys."""
        before = self.pending
        for char in _ESCAPE.sub("", text):
            if char in "\r\n":
                line, self.pending = self.pending.strip(), ""
                if line:
                    self.on_line(line)
            elif char in "\x7f\b":
                self.pending = self.pending[:-1]
            elif char == "\x15":  # Ctrl-U
                self.pending = ""
            elif char == "\t" or char >= " ":
                self.pending += char
        if self.pending != before:
            self.on_change(self.pending)
