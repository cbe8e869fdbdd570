"""``bash``: run a shell command in the workspace, bounded in time and output.

- The command runs as ``<shell> -c <command>`` with the workspace root as its working
  directory, standard input from ``/dev/null``, standard error merged into standard
  output, under a *supervisor* process (:mod:`mainspring_coding_tools.supervisor`).
- Its environment is scrubbed (:mod:`mainspring_coding_tools.environment`): an allowlist
  plus the ``bash_env_passthrough`` option; the agent's secrets are not passed.
- When sandboxed (:mod:`mainspring_coding_tools.sandbox`), the supervisor runs in a PID and
  mount namespace of its own: the command cannot see the agent's processes at all.
- Every process the command starts ends with the call. The supervisor is a child
  subreaper: daemons (``setsid cmd &``, ``setsid -f``, a double fork, ``timeout N cmd &``,
  ``setpgid``) stay its descendants, and when the shell exits, the timeout passes, the run
  is aborted or the call is cancelled, it kills and reaps all of them before it reports.
  The call returns only after that report (or, if the supervisor itself was killed, after
  killing the process groups it knows of).
- Output is kept up to a cap: the first and last halves, with the number of characters cut
  in between.
- The result reports the exit code; a non-zero exit code or a timeout makes it an error
  result, and ``details`` carries ``exit_code``, ``timed_out``, ``output_chars`` and
  ``truncated`` for programs.
- Progress: one ``ctx.update({"pid": ...})`` when the shell has started (its pid, which is
  also its process group id; sandboxed, the pid inside the namespace), so a UI can show it
  is running. Output is deliberately not
  streamed in updates: updates go to event listeners and logs without passing
  ``after_tool_result`` filters, so streaming it could leak what a redacting policy
  removes from the result.

POSIX only; the subreaper (hence the end of processes that leave the process group) needs
Linux.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal as signals
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mainspring import ToolContext, ToolResult

__all__ = ["OutputBuffer", "run_command"]

_DRAIN_S = 1.0
"""How long to wait for buffered output once every process of the command is gone."""

_STOP_S = 10.0
"""How long the supervisor may take to end everything once asked to stop."""

SUPERVISOR = str(Path(__file__).with_name("supervisor.py"))
"""The supervisor script, run as ``python -I -S SUPERVISOR <shell> <command>``."""


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
    """Feeds the output into a buffer and reports the supervisor's exit and the pipe's end."""

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


@dataclass
class _Report:
    """What the supervisor said: the shell's pid, then one final line (``None``: it
    ended without one)."""

    shell_pid: int | None = None
    final: str | None = None


async def _listen(
    reader: asyncio.StreamReader, report: _Report, started: Callable[[int], None]
) -> None:
    while line := (await reader.readline()).decode(errors="replace").strip():
        kind, _, value = line.partition(" ")
        if kind == "pid" and value.isdigit():
            report.shell_pid = int(value)
            started(report.shell_pid)
        else:
            report.final = line
            return


async def run_command(
    command: str,
    *,
    cwd: str,
    shell: str,
    env: Mapping[str, str],
    timeout_s: float,
    max_output_chars: int,
    ctx: ToolContext,
    sandbox: Sequence[str] = (),
    hidden: Sequence[str] = (),
) -> ToolResult:
    """Run ``command`` (see the module docs); never leaves a process behind.

    ``sandbox`` is the argv prefix that runs the supervisor sandboxed
    (:func:`~mainspring_coding_tools.sandbox.sandbox_command`), empty for none; sandboxed,
    the directories ``hidden`` are covered by an empty one for the command.
    """
    if ctx.signal.aborted:
        return ToolResult.error("Not run: the run was aborted")
    loop = asyncio.get_running_loop()
    buffer = OutputBuffer(max_output_chars)
    ours, theirs = socket.socketpair()
    try:
        transport, collector = await loop.subprocess_exec(
            lambda: _Collector(buffer, loop),
            *sandbox,
            sys.executable,
            "-I",
            "-S",
            SUPERVISOR,
            shell,
            command,
            *(hidden if sandbox else ()),
            cwd=cwd,
            env=dict(env),
            stdin=theirs.fileno(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    report = _Report()
    listening = asyncio.ensure_future(_listen(reader, report, lambda pid: ctx.update({"pid": pid})))
    aborted = asyncio.ensure_future(ctx.signal.wait())
    timed_out = was_aborted = False
    try:
        await asyncio.wait({listening, aborted}, timeout=timeout_s, return_when="FIRST_COMPLETED")
        if not listening.done():
            was_aborted = aborted.done()
            timed_out = not was_aborted
    finally:
        aborted.cancel()
        # sandboxed, the shell's pid is one of the namespace's: not to be killed from here
        # (killing the supervisor ends the namespace, and everything in it, anyway)
        shell_group = None if sandbox else report.shell_pid
        await _end(transport.get_pid(), writer, listening, collector, report, shell_group)
        transport.close()
    return _result(buffer, report, timeout_s, timed_out, was_aborted)


async def _end(
    supervisor_pid: int,
    writer: asyncio.StreamWriter,
    listening: asyncio.Future[None],
    collector: _Collector,
    report: _Report,
    shell_group: int | None,
) -> None:
    """Have the supervisor end everything (if it has not already), then wait for it and
    the output; kill what can be found if it does not answer."""
    if not listening.done():
        with contextlib.suppress(OSError, RuntimeError):
            writer.write_eof()  # asks the supervisor to stop
        await asyncio.wait({listening}, timeout=_STOP_S)
    if report.final is None:
        # the supervisor was killed, or is stuck: end what is reachable
        _kill_group(supervisor_pid)
        if shell_group is not None:
            _kill_group(shell_group)
    listening.cancel()
    await asyncio.wait({collector.exited}, timeout=_STOP_S)
    await asyncio.wait({collector.output_closed}, timeout=_DRAIN_S)
    writer.close()


def _result(
    buffer: OutputBuffer, report: _Report, timeout_s: float, timed_out: bool, was_aborted: bool
) -> ToolResult:
    final = report.final or ""
    kind, _, value = final.partition(" ")
    code: int | None = None
    if kind == "exit":
        code = int(value)
    elif kind == "signal":
        code = -int(value)
    details: dict[str, Any] = {
        "exit_code": code,
        "timed_out": timed_out,
        "output_chars": buffer.total,
        "truncated": buffer.truncated,
    }
    body = buffer.text() or "(no output)"
    if not body.endswith("\n"):
        body += "\n"
    ended = "the command and every process it started were killed"
    if was_aborted:
        return ToolResult.error(f"{body}[aborted: {ended}]", details)
    if timed_out:
        return ToolResult.error(f"{body}[timed out after {timeout_s:g} s: {ended}]", details)
    if kind == "error":
        return ToolResult.error(f"{body}[{value}]", details)
    if report.final is None:
        return ToolResult.error(
            f"{body}[the command's supervisor ended unexpectedly; the process groups it "
            "had started were killed, processes that left them may still run]",
            details,
        )
    if code is not None and code < 0:
        return ToolResult.error(f"{body}[killed by signal {_signal_name(-code)}]", details)
    return ToolResult(f"{body}[exit code: {code}]", details=details, is_error=code != 0)


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return str(number)
