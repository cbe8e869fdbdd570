"""HTTP clients and timeouts for the HTTP providers.

- :class:`LoopClients` keeps one ``httpx.AsyncClient`` per event loop, so the requests a
  provider makes from one loop share its connections. A client never outlives its loop:
  it is closed when the loop shuts down its async generators (``asyncio.run()`` and
  ``asyncio.Runner`` do, on the way out), by :meth:`LoopClients.aclose`, or when the
  object holding it is garbage-collected while its loop runs. A client whose loop was
  closed without that shutdown is dropped, never reused.
- :class:`ReadWatch` enforces the read timeout (the longest silence between two chunks)
  with one timer per timeout period instead of one per chunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TypeAlias

import httpx

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_S",
    "DEFAULT_TIMEOUT",
    "BorrowedTransport",
    "LoopClients",
    "ReadWatch",
    "TimeoutSpec",
    "resolve_timeout",
]

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=60.0, pool=10.0)
"""Seconds: ``read`` is the longest silence tolerated between two chunks of a reply."""

TimeoutSpec: TypeAlias = httpx.Timeout | float | Mapping[str, float | None] | None
"""An ``httpx.Timeout``, one number for all four phases, or a dict of the phases to change."""

DEFAULT_REQUEST_TIMEOUT_S = 600.0
"""Seconds a whole request may take, stream included, unless a provider is told otherwise."""


def resolve_timeout(value: TimeoutSpec) -> httpx.Timeout:
    """The ``httpx.Timeout`` for ``value``; ``None`` means :data:`DEFAULT_TIMEOUT`.

    A mapping changes only the phases it names (``connect``, ``read``, ``write``,
    ``pool``); a number sets all four.
    """
    if value is None:
        return DEFAULT_TIMEOUT
    if isinstance(value, httpx.Timeout):
        return value
    if isinstance(value, int | float):
        return httpx.Timeout(float(value))
    phases = DEFAULT_TIMEOUT.as_dict()
    unknown = set(value) - set(phases)
    if unknown:
        raise ValueError(f"unknown timeout phase(s): {sorted(unknown)}")
    phases.update(value)
    return httpx.Timeout(**phases)


class BorrowedTransport(httpx.AsyncBaseTransport):
    """A caller's transport, used by the provider's clients but never closed by them."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        return None


class LoopClients:
    """One client per event loop, made by ``factory`` on first use in that loop.

    Each client is tied to its loop by a small async generator that the loop tracks:
    when the loop shuts down its async generators (as ``asyncio.run()`` does before
    closing), the generator is closed and closes the client, so no connection outlives
    the loop that opened it. :meth:`aclose` closes the running loop's client now and
    forgets clients of loops already closed; the next :meth:`client` call makes a new one.
    """

    __slots__ = ("_entries", "_factory")

    def __init__(self, factory: Callable[[], httpx.AsyncClient]) -> None:
        self._factory = factory
        self._entries: dict[asyncio.AbstractEventLoop, _Entry] = {}

    async def client(self) -> httpx.AsyncClient:
        """The running loop's client, made now if it has none (or its one was closed)."""
        loop = asyncio.get_running_loop()
        entry = self._entries.get(loop)
        if entry is not None and not entry.client.is_closed:
            return entry.client
        self._forget_closed_loops()
        entry = self._entries[loop] = _Entry(self._factory())
        entry.keeper = _keep(entry, self._entries, loop)
        await anext(entry.keeper)  # now tracked by the loop; returns without suspending
        return entry.client

    async def aclose(self) -> None:
        """Close the running loop's client, if any; forget those of closed loops.

        Clients of other loops still running are left to those loops' shutdown.
        """
        self._forget_closed_loops()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        entry = self._entries.pop(loop, None)
        if entry is not None and entry.keeper is not None:
            await entry.keeper.aclose()

    def _forget_closed_loops(self) -> None:
        for loop in [loop for loop in self._entries if loop.is_closed()]:
            del self._entries[loop]


class _Entry:
    __slots__ = ("client", "keeper")

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.keeper: AsyncGenerator[None, None] | None = None


async def _keep(
    entry: _Entry, entries: dict[asyncio.AbstractEventLoop, _Entry], loop: asyncio.AbstractEventLoop
) -> AsyncGenerator[None, None]:
    """Hold ``entry.client`` until closed (by the loop's shutdown, ``aclose`` or collection)."""
    try:
        yield
    finally:
        if entries.get(loop) is entry:
            del entries[loop]
        await entry.client.aclose()


class ReadWatch:
    """Expires ``deadline`` once a wait for the next chunk has lasted ``seconds``.

    Call :meth:`waiting` before awaiting a chunk and :meth:`arrived` after it; time spent
    between the two calls of one wait is what counts, never time spent handing events on.
    One timer runs per ``seconds`` (re-armed for the current wait when it fires early),
    so a chunk costs two attribute writes and a clock read, not a timer of its own.
    :meth:`cancel` stops the timer.
    """

    __slots__ = ("_deadline", "_handle", "_loop", "_seconds", "_since")

    def __init__(self, deadline: asyncio.Timeout, seconds: float) -> None:
        self._deadline = deadline
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._since: float | None = None
        self._handle = self._loop.call_later(seconds, self._check)

    def waiting(self) -> None:
        """A wait for the next chunk begins now."""
        self._since = self._loop.time()

    def arrived(self) -> None:
        """The chunk waited for arrived (or the stream ended)."""
        self._since = None

    def cancel(self) -> None:
        """Stop watching."""
        self._handle.cancel()

    def _check(self) -> None:
        now = self._loop.time()
        since = self._since
        if since is not None and now - since >= self._seconds * 0.999:
            self._deadline.reschedule(now)  # expires now: the pending wait gets TimeoutError
            return
        start = now if since is None else since
        self._handle = self._loop.call_at(start + self._seconds, self._check)
