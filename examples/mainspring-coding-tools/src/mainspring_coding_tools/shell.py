"""``bash``: run a shell command in the workspace, bounded in time and output.

- The command runs as ``<shell> -c <command>`` with the workspace root as its working
  directory, standard input from ``/dev/null``, standard error merged into standard
  output, and ``PAGER=cat``/``GIT_PAGER=cat`` so nothing waits for a terminal.
- It runs in a new session, hence its own process group. On timeout, abort (the run's
  signal) or cancellation, the whole group is killed with ``SIGKILL``, so children and
  grandchildren go too. When the shell itself exits, whatever it left running in its group
  (``cmd &``) is killed as well: a command's effects end with its call.
- Output is kept up to a cap: the first and last halves, with the number of characters cut
  in between.
- The result reports the exit code; a non-zero exit code or a timeout makes it an error
  result, and ``details`` carries ``exit_code``, ``timed_out``, ``output_chars`` and
  ``truncated`` for programs.
- Progress: one ``ctx.update({"pid": ...})`` when the process has started (the id of its
  process group), so a UI can show it is running. Output is deliberately not streamed in
  updates: updates go to event listeners and logs without passing ``after_tool_result``
  filters, so streaming it could leak what a redacting policy removes from the result.

POSIX only (process groups, ``os.killpg``).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal as signals
from typing import Any

from mainspring import ToolContext, ToolResult

__all__ = ["OutputBuffer", "run_command"]

_DRAIN_S = 1.0
"""How long to wait for buffered output once the process group is gone."""


class OutputBuffer:
    """Keeps at most ``limit`` characters of a stream: all of it, or its head and tail."""

    __slots__ = ("_decoder", "_half", "_head", "_limit", "_overflow", "_tail", "total")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._half = limit // 2
        self._head = ""
        self._tail = ""
        self._overflow = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.total = 0

    def feed(self, data: bytes, final: bool = False) -> None:
        """Add raw output (decoded as UTF-8, invalid bytes replaced)."""
        text = self._decoder.decode(data, final)
        if not text:
            return
        self.total += len(text)
        if self._overflow:
            self._tail = (self._tail + text)[-self._half :]
            return
        self._head += text
        if len(self._head) > self._limit:
            self._overflow = True
            self._tail = self._head[self._half :][-self._half :]
            self._head = self._head[: self._half]

    @property
    def truncated(self) -> bool:
        """Whether characters were cut."""
        return self._overflow

    def text(self) -> str:
        """The kept output, with a marker where characters were cut."""
        self.feed(b"", final=True)
        if not self._overflow:
            return self._head
        cut = self.total - len(self._head) - len(self._tail)
        return f"{self._head}\n[... {cut} characters of output cut ...]\n{self._tail}"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signals.SIGKILL)


class _Collector(asyncio.SubprocessProtocol):
    """Feeds the output into a buffer and reports the shell's exit and the pipe's end.

    A protocol rather than ``asyncio.create_subprocess_exec``: ``Process.wait()`` returns
    only once the output pipe is closed too, and a background child (``cmd &``) keeps it
    open; ``process_exited`` tells when the shell itself is gone.
    """

    def __init__(self, buffer: OutputBuffer, loop: asyncio.AbstractEventLoop) -> None:
        self.buffer = buffer
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.buffer.feed(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1 and not self.output_closed.done():
            self.output_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def run_command(
    command: str,
    *,
    cwd: str,
    shell: str,
    timeout_s: float,
    max_output_chars: int,
    ctx: ToolContext,
) -> ToolResult:
    """Run ``command`` (see the module docs); never leaves a process behind."""
    if ctx.signal.aborted:
        return ToolResult.error("Not run: the run was aborted")
    loop = asyncio.get_running_loop()
    buffer = OutputBuffer(max_output_chars)
    transport, collector = await loop.subprocess_exec(
        lambda: _Collector(buffer, loop),
        shell,
        "-c",
        command,
        cwd=cwd,
        env={**os.environ, "PAGER": "cat", "GIT_PAGER": "cat"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    pgid = transport.get_pid()  # a new session: the shell leads its own process group
    ctx.update({"pid": pgid})
    aborted = asyncio.ensure_future(ctx.signal.wait())
    timed_out = was_aborted = False
    try:
        await asyncio.wait(
            {collector.exited, aborted}, timeout=timeout_s, return_when="FIRST_COMPLETED"
        )
        if not collector.exited.done():
            was_aborted = aborted.done()
            timed_out = not was_aborted
        # the shell has exited, or must: end everything still running in its group, so
        # the output pipe closes and nothing outlives the call. What was written is in
        # the pipe already; only a process that left the group (setsid) could keep it
        # open, and it is not waited for.
        _kill_group(pgid)
        await asyncio.wait({collector.exited, collector.output_closed}, timeout=_DRAIN_S)
    finally:
        _kill_group(pgid)
        aborted.cancel()
        if not collector.exited.done():
            # cancelled (the kernel cancels running tools on abort): wait the few
            # milliseconds the killed group takes to exit, so none of it outlives the call
            await asyncio.wait({collector.exited, collector.output_closed}, timeout=_DRAIN_S)
        transport.close()

    code = transport.get_returncode()
    details: dict[str, Any] = {
        "exit_code": code,
        "timed_out": timed_out,
        "output_chars": buffer.total,
        "truncated": buffer.truncated,
    }
    body = buffer.text() or "(no output)"
    if not body.endswith("\n"):
        body += "\n"
    if was_aborted:
        return ToolResult.error(f"{body}[aborted: the process group was killed]", details)
    if timed_out:
        return ToolResult.error(
            f"{body}[timed out after {timeout_s:g} s: the process group was killed]", details
        )
    if code is not None and code < 0:
        return ToolResult.error(f"{body}[killed by signal {_signal_name(-code)}]", details)
    return ToolResult(f"{body}[exit code: {code}]", details=details, is_error=code != 0)


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return str(number)
