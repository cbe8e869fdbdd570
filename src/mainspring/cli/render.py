"""Renderers for ``mainspring run``: a terminal stream, or JSON lines of events.

The terminal renderer writes reply text to stdout as it arrives and everything else to
stderr, so ``mainspring run ... > answer.txt`` keeps only the answer: a line when a tool
call starts (``→ name {arguments}``) and one when it ends (``• name {arguments} ok (0.41s)
first line of the result``, or ``error``, or ``blocked by PLUGIN: reason``), errors, and a
spinner while waiting on the model or on running tools (with their names and the seconds
elapsed). While a model loads (:meth:`TerminalRenderer.during`) or writes what is not
shown (thinking, a tool call's arguments), the spinner says so, with the tokens so far;
after a reply that took :data:`SLOW_REPLY_S` or longer, a line gives its tokens, seconds
and rate.
In ``chat``, what is typed while a reply streams (:meth:`TerminalRenderer.show_typed`) is
shown on the line under the reply (beside the spinner while there is one), and a steering
note (:meth:`TerminalRenderer.queue_note`) waits there until the turn ends, then is
printed between the turns. :func:`cut_notice` is the line ``run`` and ``chat`` print after
a reply that was cut off.
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
from collections.abc import Awaitable, Mapping
from typing import Any, TextIO, TypeVar

from ..events import event_to_json
from ..signal import AbortSignal

__all__ = ["JsonRenderer", "TerminalRenderer", "cut_notice"]

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

SLOW_REPLY_S = 3.0
"""A reply that streamed this long or longer gets a line with its tokens and rate."""

_T = TypeVar("_T")


_ARGUMENTS_SHOWN = 60

_CUT = {
    "length": "at the model's output-token limit",
    "repetition": "because it had started to repeat itself",
}


def cut_notice(message: Any) -> str | None:
    """The line printed after a reply that was cut off (its ``stop_reason`` is ``length``
    or ``repetition``), else ``None``."""
    reason = getattr(message, "stop_reason", None)
    why = _CUT.get(reason) if isinstance(reason, str) else None
    return f"mainspring: the reply was cut off {why} (stop_reason={reason})" if why else None


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
        """What is being typed to steer (``chat``): after the spinner, else under the reply;
        set it with :meth:`show_typed`."""
        self._queued: list[str] = []  # steering notes to print when the turn ends
        self._footer_shown = False
        self._spinner: asyncio.Task[None] | None = None
        self._line_open = False
        self.model = ""
        """The model's name, shown while waiting on it (set by the command)."""
        self._doing = ""  # what the model is writing that is not shown, or what loads
        self._reply_started: float | None = None
        self._reply_deltas = 0

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.color else text

    def _red(self, text: str) -> str:
        return f"\x1b[31m{text}\x1b[0m" if self.color else text

    def _status(self) -> str:
        """The spinner's text: the running tools and the seconds since the oldest started,
        or the seconds spent waiting on the model (after the first one); then what is typed
        or the steering note waiting for the turn to end."""
        footer = self._footer()
        return self._activity() + (f"  {footer}" if footer else "")

    def _activity(self) -> str:
        now = time.perf_counter()
        if self._doing and not self._running:
            since = self._reply_started if self._reply_started is not None else now
            count = self._reply_deltas
            tokens = f" · ~{count} token{'' if count == 1 else 's'}" if count else ""
            return f"{self._doing}{tokens} · {now - since:.0f}s"
        if self._running:
            names = ", ".join(dict.fromkeys(self._running.values()))
            oldest = min(
                (self._started[key][0] for key in self._running if key in self._started),
                default=now,
            )
            return f"{names} · {now - oldest:.1f}s"
        waited = now - self._waiting_since
        if waited < 1:
            return ""
        return f"waiting for {self.model} · {waited:.0f}s" if self.model else f"{waited:.0f}s"

    async def during(self, doing: str, work: Awaitable[_T]) -> _T:
        """Await ``work`` with the spinner saying ``doing`` (e.g. loading a model)."""
        self._doing, self._reply_started, self._reply_deltas = doing, time.perf_counter(), 0
        self._start_spinner()
        try:
            return await work
        finally:
            self._stop_spinner()
            self._doing, self._reply_started = "", None

    async def prepare(self, agent: Any) -> None:
        """Before a run: name the agent's model for the spinner, and start its provider's
        optional ``warm_up(model)`` (the local provider loads its model) with the spinner
        saying so. A failure is left for the run itself to report."""
        model = agent.state.model
        self.model = model.ref
        with contextlib.suppress(Exception):
            warm_up = getattr(agent.provider, "warm_up", None)
            if warm_up is not None:
                await self.during(f"loading {model.ref}", warm_up(model))

    def _streamed(self, delta: Any) -> None:
        """One delta of the reply: text is written; anything else shows on the spinner."""
        self._reply_deltas += 1
        if delta.type == "text_delta":
            self._stop_spinner()
            self._doing = ""
            self._erase_footer()
            self.out.write(delta.text)
            self.out.flush()
            self._line_open = True
            self._draw_footer()
            return
        if delta.type == "thinking_delta":
            self._doing = "thinking"
        elif delta.type == "tool_call_start":
            self._doing = f"writing a call to {delta.name}"
        if self._doing and self._spinner is None:
            self._end_line()
            waiting_since = self._waiting_since
            self._start_spinner()
            self._waiting_since = waiting_since

    def _reply_ended(self, message: Any) -> None:
        """After a slow reply, a line with its tokens, seconds and rate."""
        started, self._reply_started, self._doing = self._reply_started, None, ""
        if started is None or not self.interactive:
            return
        took = time.perf_counter() - started
        tokens = message.usage.output_tokens or self._reply_deltas
        if took >= SLOW_REPLY_S and tokens:
            self.err.write(
                self._dim(f"{tokens} tokens in {took:.1f}s ({tokens / took:.1f} tokens/s)") + "\n"
            )

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

    def _footer(self) -> str:
        """The line under the streaming reply: what is typed, else the last queued note."""
        if self.typed:
            return f"» {self.typed}"
        return self._queued[-1] if self._queued else ""

    def _draw_footer(self) -> None:
        """Show :meth:`_footer` on the line under the cursor, the cursor left where it is
        (IND and RI first make room for that line, scrolling if the cursor is on the
        last one). Only on a terminal, and only while no spinner shows it instead."""
        text = self._footer()
        if not self.interactive or self._spinner is not None or not text:
            self._erase_footer()
            return
        text = text[: max(2, shutil.get_terminal_size().columns - 1)]
        self.out.flush()
        self.err.write(f"\x1bD\x1bM\x1b7\x1bD\r\x1b[2K{self._dim(text)}\x1b8")
        self.err.flush()
        self._footer_shown = True

    def _erase_footer(self) -> None:
        if self._footer_shown:
            self._footer_shown = False
            self.out.flush()
            self.err.write("\x1b7\x1bD\r\x1b[2K\x1b8")
            self.err.flush()

    def show_typed(self, text: str) -> None:
        """Show ``text`` as what is being typed (see the module docstring)."""
        self.typed = text
        if self._spinner is None and self._line_open:
            self._draw_footer()

    def queue_note(self, text: str) -> None:
        """Print ``text`` (a steering note) when the current turn ends; until then it is
        shown under the reply. With no run streaming, it is printed at once."""
        self._queued.append(text)
        if self._line_open or self._spinner is not None:
            if self._spinner is None:
                self._draw_footer()
            return
        self._print_queued()

    def _print_queued(self) -> None:
        queued, self._queued = self._queued, []
        for text in queued:
            self.note(text)

    def _start_spinner(self) -> None:
        self._erase_footer()
        if self.interactive and self._spinner is None:
            self._waiting_since = time.perf_counter()
            with contextlib.suppress(RuntimeError):
                self._spinner = asyncio.get_running_loop().create_task(self._spin())

    def note(self, text: str) -> None:
        """Write ``text`` on stderr as a line of its own, apart from the streamed reply (a
        reply in mid-line goes on on the next line)."""
        spinning = self._spinner is not None
        self._stop_spinner()
        self._erase_footer()
        self._end_line()
        self.err.write(self._dim(text) + "\n")
        self.err.flush()
        if spinning:
            self._start_spinner()

    def _end_line(self) -> None:
        self._erase_footer()
        if self._line_open:
            self.out.write("\n")
            self.out.flush()
            self._line_open = False

    async def __call__(self, event: Any, signal: AbortSignal) -> None:
        kind = event.type
        if kind == "turn_start":
            self._start_spinner()
            self._reply_started, self._reply_deltas = time.perf_counter(), 0
        elif kind == "message_update":
            self._streamed(event.delta)
        elif kind == "message_end" and event.message.role == "assistant":
            self._stop_spinner()
            self._end_line()
            message = event.message
            self._reply_ended(message)
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
        elif kind == "turn_end":
            self._print_queued()
        elif kind == "agent_end":
            self._stop_spinner()
            self._end_line()
            self._print_queued()
            self.reason = event.reason
            if event.reason == "stopped_by_hook":
                self.err.write(self._dim(f"stopped: {event.detail}") + "\n")
        self.err.flush()
