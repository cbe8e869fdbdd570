"""Renderers for ``mainspring run``: a terminal stream, or JSON lines of events.

The terminal renderer writes reply text to stdout as it arrives and everything else
(one line per tool call with its outcome and duration, errors, a spinner while waiting
on the model) to stderr, so ``mainspring run ... > answer.txt`` keeps only the answer.
The spinner and colours appear only when stderr is a terminal; ``NO_COLOR`` (set and not
empty, see no-color.org) turns colours off, and ``TERM=dumb`` turns off colours and the
spinner.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping
from typing import Any, TextIO

from ..kernel.events import event_to_json
from ..signal import AbortSignal

__all__ = ["JsonRenderer", "TerminalRenderer"]

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class JsonRenderer:
    """Prints every event as one JSON line (``event_to_json``), flushed per event."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.reason: str | None = None

    def __call__(self, event: Any, signal: AbortSignal) -> None:
        if event.type == "agent_end":
            self.reason = event.reason
        self.out.write(event_to_json(event) + "\n")
        self.out.flush()


class TerminalRenderer:
    """Streams a run for a person (see the module docstring).

    ``environ`` (default ``os.environ``) is where ``NO_COLOR`` and ``TERM`` are read, once.
    ``interactive`` says whether the spinner runs, ``color`` whether lines are coloured.
    """

    def __init__(self, out: TextIO, err: TextIO, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        dumb = env.get("TERM", "").strip().lower() == "dumb"
        self.out = out
        self.err = err
        self.interactive = err.isatty() and not dumb
        self.color = self.interactive and not env.get("NO_COLOR")
        self.reason: str | None = None
        self._started: dict[str, float] = {}
        self._spinner: asyncio.Task[None] | None = None
        self._line_open = False

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.color else text

    def _red(self, text: str) -> str:
        return f"\x1b[31m{text}\x1b[0m" if self.color else text

    async def _spin(self) -> None:
        index = 0
        try:
            while True:
                self.err.write(f"\r{_FRAMES[index % len(_FRAMES)]} ")
                self.err.flush()
                index += 1
                await asyncio.sleep(0.08)
        finally:
            self.err.write("\r  \r")
            self.err.flush()

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.cancel()
            self._spinner = None

    def _start_spinner(self) -> None:
        if self.interactive and self._spinner is None:
            with contextlib.suppress(RuntimeError):
                self._spinner = asyncio.get_running_loop().create_task(self._spin())

    def _end_line(self) -> None:
        if self._line_open:
            self.out.write("\n")
            self.out.flush()
            self._line_open = False

    async def __call__(self, event: Any, signal: AbortSignal) -> None:
        kind = event.type
        if kind == "turn_start":
            self._start_spinner()
        elif kind == "message_update":
            self._stop_spinner()
            delta = event.delta
            if delta.type == "text_delta":
                self.out.write(delta.text)
                self.out.flush()
                self._line_open = True
        elif kind == "message_end" and event.message.role == "assistant":
            self._stop_spinner()
            self._end_line()
            message = event.message
            if message.stop_reason in ("error", "aborted"):
                label = "error" if message.stop_reason == "error" else "aborted"
                self.err.write(self._red(f"{label}: {message.error_message}") + "\n")
        elif kind == "tool_execution_start":
            self._started[event.tool_call_id] = time.perf_counter()
        elif kind == "tool_execution_end":
            took = time.perf_counter() - self._started.pop(event.tool_call_id, time.perf_counter())
            outcome = "error" if event.is_error else "ok"
            first = (event.result.text.strip().splitlines() or [""])[0][:100]
            line = f"• {event.tool_name} {outcome} ({took:.2f}s) {first}"
            self.err.write((self._red(line) if event.is_error else self._dim(line)) + "\n")
            self.err.flush()
            self._start_spinner()
        elif kind == "retry":
            self.err.write(
                self._dim(f"retry {event.attempt}/{event.max_attempts} in {event.delay_s:.1f}s: ")
                + event.error
                + "\n"
            )
        elif kind == "compaction_end":
            note = (
                f"failed: {event.error}"
                if event.error
                else f"{event.tokens_before} → {event.tokens_after} tokens"
            )
            self.err.write(self._dim(f"compacted ({event.reason}): {note}") + "\n")
        elif kind == "agent_end":
            self._stop_spinner()
            self._end_line()
            self.reason = event.reason
            if event.reason == "stopped_by_hook":
                self.err.write(self._dim(f"stopped: {event.detail}") + "\n")
        self.err.flush()
