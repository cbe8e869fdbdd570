"""A server's stderr, kept as a bounded ring: the last :data:`RING_BYTES` it wrote.

The server process writes into a pipe; the runtime loop reads it as data arrives and
keeps only the tail, so a server that writes without end costs a fixed amount of memory
and no disk. :meth:`StderrRing.tail` is what failure messages quote.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import TextIO

__all__ = ["RING_BYTES", "StderrRing"]

RING_BYTES = 64 * 1024
_READ = 65536


class StderrRing:
    """One pipe for a server's stderr and the last :data:`RING_BYTES` read from it."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._read_fd, write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self.writer: TextIO | None = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        """The file the server's stderr goes to (passed to the SDK's ``stdio_client``)."""
        asyncio.get_running_loop().add_reader(self._read_fd, self._drain)
        self._reading = True

    def _drain(self) -> None:
        try:
            chunk = os.read(self._read_fd, _READ)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._stop_reading()
            return
        self._buffer += chunk
        if len(self._buffer) > RING_BYTES:
            del self._buffer[: len(self._buffer) - RING_BYTES]

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            with contextlib.suppress(RuntimeError, ValueError):
                asyncio.get_running_loop().remove_reader(self._read_fd)

    def tail(self, limit: int = 2_000) -> str:
        """The last ``limit`` characters written (whatever the pipe holds is read first)."""
        if self._reading:
            with contextlib.suppress(RuntimeError):
                while self._reading:
                    before = len(self._buffer)
                    self._drain()
                    if len(self._buffer) == before:
                        break
        return self._buffer.decode("utf-8", errors="replace").strip()[-limit:]

    def close(self) -> None:
        """Stop reading and release both ends of the pipe (the tail stays readable).

        Until then the write end stays open here too: the SDK holds it for the process
        and may write to it itself.
        """
        if self.writer is not None:
            with contextlib.suppress(OSError):
                self.writer.close()
            self.writer = None
        self._stop_reading()
        with contextlib.suppress(OSError):
            os.close(self._read_fd)
        self._read_fd = -1
