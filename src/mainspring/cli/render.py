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
import json
import os
import time
from collections.abc import Mapping
from typing import Any, TextIO

from ..kernel.events import event_to_json
from ..signal import AbortSignal

__all__ = ["JsonRenderer", "TerminalRenderer"]

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


_ARGUMENTS_SHOWN = 60


def _shortened(args: Any) -> str:
    """A call's arguments as one short line of JSON."""
    try:
        text = json.dumps(args, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = "{...}"
    return text if len(text) <= _ARGUMENTS_SHOWN else text[: _ARGUMENTS_SHOWN - 1] + "…"


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
        self._started: dict[str, tuple[float, str]] = {}
        self._blocked: set[str] = set()
        self._spinner: asyncio.Task[None] | None = None
        self._line_open = False

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.color else text

    def _red(self, text: str) -> str:
        return f"\x1b[31m{text}\x1b[0m" if self.color else text

    async def _spin(self) -> None:
        index = 0
        while True:
            self.err.write(f"\r{_FRAMES[index % len(_FRAMES)]} ")
            self.err.flush()
            index += 1
            await asyncio.sleep(0.08)

    def _stop_spinner(self) -> None:
        """Stop the spinner and erase it now, before anything else is written: erased
        later (when the cancelled task runs again), it would wipe the first streamed text."""
        if self._spinner is not None:
            self._spinner.cancel()
            self._spinner = None
            self.err.write("\r  \r")
            self.err.flush()

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
            self._started[event.tool_call_id] = (time.perf_counter(), _shortened(event.args))
        elif kind == "tool_decision" and event.decision == "block":
            self._stop_spinner()
            self._blocked.add(event.tool_call_id)
            line = (
                f"• {event.tool_name} blocked by {event.plugin or event.decided_by}: {event.reason}"
            )
            self.err.write(self._red(line) + "\n")
        elif kind == "tool_execution_end":
            self._stop_spinner()
            started, args = self._started.pop(event.tool_call_id, (time.perf_counter(), ""))
            if event.tool_call_id not in self._blocked:
                took = time.perf_counter() - started
                outcome = "error" if event.is_error else "ok"
                first = (event.result.text.strip().splitlines() or [""])[0][:100]
                line = f"• {event.tool_name} {args} {outcome} ({took:.2f}s) {first}"
                self.err.write((self._red(line) if event.is_error else self._dim(line)) + "\n")
            self._blocked.discard(event.tool_call_id)
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
