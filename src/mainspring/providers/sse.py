"""An incremental Server-Sent Events parser.

Follows the WHATWG event-stream rules, with two deliberate departures that real model
servers need:

- A final event that is not followed by a blank line is still dispatched when the stream
  ends (the spec discards it). It is marked ``complete=False`` so a caller can tell a
  stream that was cut mid-event from one that ended cleanly: if its data does not parse,
  the stream was cut.
- Line and event sizes are bounded (``max_size`` characters); a larger one raises
  :class:`SSEError` instead of growing without limit.

Line endings may be LF, CR or CRLF, also split across chunks. Bytes are decoded as UTF-8
incrementally (a character split across chunks is reassembled; invalid bytes become
U+FFFD), and a leading byte-order mark is dropped.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_SIZE", "SSEError", "SSEEvent", "SSEParser", "aiter_sse"]

DEFAULT_MAX_SIZE = 16 * 1024 * 1024
"""The default bound, in characters, on one line and on one event's data."""

_LINE_END = re.compile(r"\r\n|\r|\n")


class SSEError(ValueError):
    """The byte stream is not a usable event stream (for now: a line or event too large)."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event.

    ``event`` is the ``event:`` field (``"message"`` when absent); ``data`` joins the
    event's ``data:`` lines with ``"\\n"``; ``id`` is the last event id seen so far on the
    stream; ``retry`` is this event's ``retry:`` field when it was a valid integer.
    ``complete`` is false only for a final event the stream ended in without a blank line.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    complete: bool = True


class SSEParser:
    """Feed chunks in, get complete events out.

    :meth:`feed` takes bytes (decoded as UTF-8) or already-decoded text and returns the
    events completed by that chunk, in order. :meth:`close` must be called once when the
    stream ends: it returns the final, unterminated event if there is one. Comment lines
    (starting with ``:``) and unknown fields are ignored; an event with no ``data:`` line
    is not dispatched, as the spec says.

    Memory is bounded by ``max_size``: the unterminated rest of a line is kept as a list
    of pieces (so a long line costs linear time, not quadratic) and raises
    :class:`SSEError` as soon as it exceeds ``max_size``, as does an event whose data
    lines add up to more.
    """

    __slots__ = (
        "_data",
        "_data_size",
        "_decoder",
        "_event",
        "_last_id",
        "_max_size",
        "_partial",
        "_partial_size",
        "_retry",
        "_skip_lf",
        "_started",
    )

    def __init__(self, *, max_size: int = DEFAULT_MAX_SIZE) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._max_size = max_size
        self._partial: list[str] = []
        self._partial_size = 0
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._retry: int | None = None
        self._last_id: str | None = None

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        """Parse ``chunk`` and return the events it completed."""
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        return self._feed_text(text) if text else []

    def close(self) -> list[SSEEvent]:
        """End the stream: return the pending event (``complete=False``), if any."""
        events = self._feed_text(self._decoder.decode(b"", final=True))
        if self._partial:
            line = "".join(self._partial)
            self._partial = []
            self._partial_size = 0
            self._process([line], events)
        if self._data:
            events.append(self._build(complete=False))
        self._reset_event()
        return events

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not self._started and text:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf:
            # A CR that ended the previous chunk may be the first half of a CRLF.
            self._skip_lf = False
            if text[:1] == "\n":
                text = text[1:]
        if not text:
            return []
        if "\r" in text:
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        rest = lines.pop()  # what follows the last line end: the start of the next line
        if self._partial and lines:
            self._partial.append(lines[0])
            lines[0] = "".join(self._partial)
            self._partial = []
            self._partial_size = 0
        if rest:
            self._partial.append(rest)
            self._partial_size += len(rest)
            if self._partial_size > self._max_size:
                raise SSEError(f"event-stream line longer than {self._max_size} characters")
        events: list[SSEEvent] = []
        if lines:
            self._process(lines, events)
        return events

    def _process(self, lines: list[str], events: list[SSEEvent]) -> None:
        for line in lines:
            if not line:
                if self._data:
                    events.append(self._build(complete=True))
                    self._data = []
                    self._data_size = 0
                self._event = ""
                self._retry = None
                continue
            if line[0] == ":":
                continue
            name, colon, value = line.partition(":")
            if colon and value[:1] == " ":
                value = value[1:]
            if name == "data":
                self._data.append(value)
                self._data_size += len(value) + 1
                if self._data_size > self._max_size:
                    raise SSEError(f"event-stream event larger than {self._max_size} characters")
            elif name == "event":
                self._event = value
            elif name == "id":
                if "\x00" not in value:
                    self._last_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                self._retry = int(value)

    def _build(self, *, complete: bool) -> SSEEvent:
        data = self._data
        event = _new_event(SSEEvent)  # the frozen dataclass's fields, set without __init__
        _set(event, "data", data[0] if len(data) == 1 else "\n".join(data))
        _set(event, "event", self._event or "message")
        _set(event, "id", self._last_id)
        _set(event, "retry", self._retry)
        _set(event, "complete", complete)
        return event

    def _reset_event(self) -> None:
        self._data = []
        self._data_size = 0
        self._event = ""
        self._retry = None


_new_event = object.__new__
_set = object.__setattr__


async def aiter_sse(
    chunks: AsyncIterable[bytes | str], *, max_size: int = DEFAULT_MAX_SIZE
) -> AsyncIterator[SSEEvent]:
    """Parse an async stream of chunks (e.g. ``response.aiter_bytes()``) into events."""
    parser = SSEParser(max_size=max_size)
    async for chunk in chunks:
        for event in parser.feed(chunk):
            yield event
    for event in parser.close():
        yield event
