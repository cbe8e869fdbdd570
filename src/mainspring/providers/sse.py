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
    """

    __slots__ = (
        "_data",
        "_data_size",
        "_decoder",
        "_event",
        "_has_data",
        "_last_id",
        "_max_size",
        "_partial",
        "_retry",
        "_skip_lf",
        "_started",
    )

    def __init__(self, *, max_size: int = DEFAULT_MAX_SIZE) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._max_size = max_size
        self._partial = ""
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._data_size = 0
        self._has_data = False
        self._event = ""
        self._retry: int | None = None
        self._last_id: str | None = None

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        """Parse ``chunk`` and return the events it completed."""
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        return self._feed_text(text)

    def close(self) -> list[SSEEvent]:
        """End the stream: return the pending event (``complete=False``), if any."""
        events = self._feed_text(self._decoder.decode(b"", final=True))
        if self._partial:
            line, self._partial = self._partial, ""
            self._process_line(line, events)
        if self._has_data:
            events.append(self._build(complete=False))
        self._reset_event()
        return events

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not text:
            return []
        if not self._started:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._skip_lf and text.startswith("\n"):
            text = text[1:]
        self._skip_lf = False
        events: list[SSEEvent] = []
        buffer = self._partial + text if self._partial else text
        start = 0
        for match in _LINE_END.finditer(buffer):
            self._process_line(buffer[start : match.start()], events)
            start = match.end()
        self._partial = buffer[start:]
        if len(self._partial) > self._max_size:
            raise SSEError(f"event-stream line longer than {self._max_size} characters")
        # A CR ending the chunk may be the first half of a CRLF split across chunks.
        self._skip_lf = buffer.endswith("\r")
        return events

    def _process_line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            if self._has_data:
                events.append(self._build(complete=True))
            self._reset_event()
            return
        if line.startswith(":"):
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_size += len(value) + 1
            self._has_data = True
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
        return SSEEvent(
            data="\n".join(self._data),
            event=self._event or "message",
            id=self._last_id,
            retry=self._retry,
            complete=complete,
        )

    def _reset_event(self) -> None:
        self._data = []
        self._data_size = 0
        self._has_data = False
        self._event = ""
        self._retry = None


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
