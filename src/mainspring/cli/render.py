"""Renderers for ``mainspring run``: a terminal stream, or JSON lines of events.

The terminal renderer writes reply text to stdout as it arrives and everything else to
stderr, so ``mainspring run ... > answer.txt`` keeps only the answer: a line when a tool
call starts (``→ name {arguments}``) and one when it ends (``• name {arguments} ok (0.41s)
first line of the result``, or ``error``, or ``blocked by PLUGIN: reason``), errors, and a
spinner while waiting on the model or on running tools (with their names and the seconds
elapsed).
The spinner and colours appear only when stderr is a terminal; ``NO_COLOR`` (set and not
empty, see no-color.org) turns colours off, and ``TERM=dumb`` turns off colours and the
spinner.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
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
    """Prints every event as one JSON line, flushed per event (see ``docs/events.md``).

    Every event but ``message_update`` is ``event_to_json(event)``. A ``message_update``
    carries ``seq``, ``run_id``, ``turn``, ``delta`` (the provider's stream event) and
    ``index``, the position in the message's ``content`` of the block the delta extends
    (absent for a delta that changes no block, such as a usage report), instead of the
    whole partial message, which would repeat the reply so far at every delta. With
    ``full=True`` it is ``event_to_json(event)`` too, ``message`` included.
    """

    def __init__(self, out: TextIO, full: bool = False) -> None:
        self.out = out
        self.full = full
        self.reason: str | None = None
        self._blocks: list[str] = []  # the kind of each block of the streaming message
        self._calls: dict[str, int] = {}  # a tool call's wire id -> its block

    def _index(self, delta: Any) -> int | None:
        """The block ``delta`` extends, as the kernel's stream assembler folds it."""
        kind = getattr(delta, "type", None)
        blocks = self._blocks
        if kind in ("text_delta", "thinking_delta"):
            block = "text" if kind == "text_delta" else "thinking"
            if not blocks or blocks[-1] != block:
                blocks.append(block)
            return len(blocks) - 1
        if kind in ("tool_call_start", "tool_call_delta", "tool_call_end"):
            index = self._calls.get(delta.id)
            if index is None and kind != "tool_call_end":
                blocks.append("call")
                index = self._calls[delta.id] = len(blocks) - 1
            return index
        return None

    def _update(self, event: Any) -> str:
        data: dict[str, Any] = {
            "type": event.type,
            "seq": event.seq,
            "run_id": event.run_id,
            "turn": event.turn,
        }
        index = self._index(event.delta)
        if index is not None:
            data["index"] = index
        data["delta"] = _delta(event.delta)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    def __call__(self, event: Any, signal: AbortSignal) -> None:
        kind = event.type
        if kind == "agent_end":
            self.reason = event.reason
        elif kind == "message_start":
            self._blocks, self._calls = [], {}
        if kind == "message_update" and not self.full:
            line = self._update(event)
        else:
            if kind == "message_update":
                self._index(event.delta)
            line = event_to_json(event)
        self.out.write(line + "\n")
        self.out.flush()


def _delta(delta: Any) -> Any:
    """A stream event as JSON-ready data (a dataclass's fields, ``type`` first)."""
    if dataclasses.is_dataclass(delta) and not isinstance(delta, type):
        data: dict[str, Any] = {"type": getattr(delta, "type", type(delta).__name__)}
        for item in dataclasses.fields(delta):
            data[item.name] = _delta(getattr(delta, item.name))
        return data
    if isinstance(delta, str | int | float | bool) or delta is None:
        return delta
    if isinstance(delta, list | tuple):
        return [_delta(item) for item in delta]
    if isinstance(delta, dict):
        return {str(key): _delta(value) for key, value in delta.items()}
    dump = getattr(delta, "model_dump", None)
    return dump(mode="json") if callable(dump) else repr(delta)


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
        self._running: dict[str, str] = {}  # tool call id -> tool name, while it runs
        self._waiting_since = time.perf_counter()
        self._shown = 0  # characters the spinner's line holds
        self.typed = ""
        """Text to show after the spinner (``chat``: what is being typed to steer)."""
        self._spinner: asyncio.Task[None] | None = None
        self._line_open = False

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.color else text

    def _red(self, text: str) -> str:
        return f"\x1b[31m{text}\x1b[0m" if self.color else text

    def _status(self) -> str:
        """The spinner's text: the running tools and the seconds since the oldest started,
        or the seconds spent waiting on the model (after the first one); then
        :attr:`typed`."""
        typed = f"  » {self.typed}" if self.typed else ""
        return self._activity() + typed

    def _activity(self) -> str:
        now = time.perf_counter()
        if self._running:
            names = ", ".join(dict.fromkeys(self._running.values()))
            oldest = min(
                (self._started[key][0] for key in self._running if key in self._started),
                default=now,
            )
            return f"{names} · {now - oldest:.1f}s"
        waited = now - self._waiting_since
        return f"{waited:.0f}s" if waited >= 1 else ""

    async def _spin(self) -> None:
        index = 0
        while True:
            text = f"{_FRAMES[index % len(_FRAMES)]} {self._status()}"
            # one row: a wrapped line could not be taken back with a carriage return
            text = text[: max(2, shutil.get_terminal_size().columns - 1)]
            # spaces, not an erase sequence: blank what the previous frame left over
            self.err.write(f"\r{self._dim(text)}{' ' * max(0, self._shown - len(text))}")
            self._shown = len(text)
            self.err.flush()
            index += 1
            await asyncio.sleep(0.08)

    def _stop_spinner(self) -> None:
        """Stop the spinner and erase it now, before anything else is written: erased
        later (when the cancelled task runs again), it would wipe the first streamed text."""
        if self._spinner is not None:
            self._spinner.cancel()
            self._spinner = None
            self.err.write(f"\r{' ' * max(2, self._shown)}\r")
            self._shown = 0
            self.err.flush()

    def _start_spinner(self) -> None:
        if self.interactive and self._spinner is None:
            self._waiting_since = time.perf_counter()
            with contextlib.suppress(RuntimeError):
                self._spinner = asyncio.get_running_loop().create_task(self._spin())

    def note(self, text: str) -> None:
        """Write ``text`` on stderr as a line of its own, apart from the streamed reply (a
        reply in mid-line goes on on the next line)."""
        spinning = self._spinner is not None
        self._stop_spinner()
        self._end_line()
        self.err.write(self._dim(text) + "\n")
        self.err.flush()
        if spinning:
            self._start_spinner()

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
        elif kind == "tool_decision" and event.decision == "allow":
            self._stop_spinner()
            args = self._started.get(event.tool_call_id, (0.0, ""))[1]
            self.err.write(self._dim(f"→ {event.tool_name} {args}") + "\n")
            self._running[event.tool_call_id] = event.tool_name
            self._start_spinner()
        elif kind == "tool_decision" and event.decision == "block":
            self._stop_spinner()
            self._blocked.add(event.tool_call_id)
            line = (
                f"• {event.tool_name} blocked by {event.plugin or event.decided_by}: {event.reason}"
            )
            self.err.write(self._red(line) + "\n")
        elif kind == "tool_execution_end":
            self._stop_spinner()
            self._running.pop(event.tool_call_id, None)
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
