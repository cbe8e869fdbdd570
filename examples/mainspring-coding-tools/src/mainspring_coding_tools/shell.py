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
    env = {**os.environ, "PAGER": "cat", "GIT_PAGER": "cat"}
    process = await asyncio.create_subprocess_exec(
        shell,
        "-c",
        command,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    pgid = process.pid  # a new session: the shell leads its own process group
    ctx.update({"pid": pgid})
    buffer = OutputBuffer(max_output_chars)
    assert process.stdout is not None
    stdout = process.stdout

    async def pump() -> None:
        while chunk := await stdout.read(65536):
            buffer.feed(chunk)

    reader = asyncio.ensure_future(pump())
    exited = asyncio.ensure_future(process.wait())
    aborted = asyncio.ensure_future(ctx.signal.wait())
    timed_out = was_aborted = False
    try:
        await asyncio.wait({exited, aborted}, timeout=timeout_s, return_when="FIRST_COMPLETED")
        if not exited.done():
            was_aborted = aborted.done()
            timed_out = not was_aborted
        # the shell has exited, or must: end everything still running in its group, so
        # the output pipe closes and nothing outlives the call
        _kill_group(pgid)
        await exited
        # what was written is in the pipe already; only a process that left the group
        # (setsid) could keep it open, and it is not waited for
        await asyncio.wait({reader}, timeout=_DRAIN_S)
    finally:
        _kill_group(pgid)
        aborted.cancel()
        with contextlib.suppress(BaseException):  # a second cancellation: stop waiting
            await asyncio.wait({exited, reader}, timeout=_DRAIN_S)
        reader.cancel()
        exited.cancel()

    output = buffer.text()
    code = process.returncode
    details: dict[str, Any] = {
        "exit_code": code,
        "timed_out": timed_out,
        "output_chars": buffer.total,
        "truncated": buffer.truncated,
    }
    body = output if output else "(no output)"
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
