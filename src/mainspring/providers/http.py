"""Shared httpx plumbing for the HTTP providers: timeouts, deadlines and an abortable SSE read.

Every failure leaves here as a :class:`~mainspring.providers.base.ProviderError` (the
mapping of statuses, error bodies and transport failures lives in
:mod:`~mainspring.providers.errors`; its public names are importable from here too):

- A server that stops sending is cut off after ``timeout.read`` seconds without a byte,
  enforced here per chunk (so it holds for any transport, mocks included).
- A whole request, from connecting to the last byte of the stream, is cut off after
  ``request_timeout_s`` seconds (default :data:`DEFAULT_REQUEST_TIMEOUT_S`; ``None``:
  no total deadline), so a server that trickles bytes or sends only keep-alive comments
  cannot hold a request open forever. That error is retryable, like the other timeouts:
  ``retry.max_attempts`` bounds how often the kernel tries again.
- A successful response must be ``text/event-stream``: any other content type (an HTML
  page from a wrong base URL, a login portal, a proxy) is a non-retryable error naming
  the content type and the URL; a JSON error object sent with status 200 is mapped like
  an error body.

Secrets never reach a message or a repr: the API key and credential-like header values
are replaced by ``***`` in every error text built here.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from contextlib import aclosing
from typing import Any, Protocol, Self, TypeAlias

import httpx

from ..signal import AbortSignal
from .base import Model, ModelRequest, ProviderError, StreamEvent
from .clients import (
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_TIMEOUT,
    BorrowedTransport,
    LoopClients,
    ReadWatch,
    TimeoutSpec,
    resolve_timeout,
)
from .errors import (
    MAX_ERROR_BODY_BYTES,
    SECRET_HEADER,
    check_response,
    decode_event_json,
    error_from_payload,
    error_from_status,
    error_from_transport,
    is_context_overflow,
    parse_retry_after,
    redact,
)
from .sse import SSEError, SSEEvent, SSEParser

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_S",
    "DEFAULT_TIMEOUT",
    "MAX_ERROR_BODY_BYTES",
    "HTTPProvider",
    "TimeoutSpec",
    "decode_event_json",
    "error_from_payload",
    "error_from_status",
    "error_from_transport",
    "is_context_overflow",
    "parse_retry_after",
    "redact",
    "resolve_timeout",
]

_QUEUE_SIZE = 256
DRAIN_S = 0.25
"""Seconds the end of a completed reply's response is waited for, so its connection can be
reused (servers normally end it right after the last event)."""


class _Marker(enum.Enum):
    END = "end"
    WAKE = "wake"


_Item: TypeAlias = list[SSEEvent] | Exception | _Marker


class WireStream(Protocol):
    """Decodes one response's SSE events into stream events."""

    done: bool

    def feed(self, event: SSEEvent) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...


class HTTPProvider:
    """Base of the HTTP providers: configuration, redaction and the abortable SSE read.

    Requests share one ``httpx.AsyncClient`` (and so its connections) per event loop,
    made on first use in that loop: a provider can serve successive ``asyncio.run()``
    calls, and a client is never used outside the loop that made it. :meth:`aclose`
    (or leaving ``async with provider:``) closes the running loop's client; a client left
    open is closed when its loop shuts down (``asyncio.run()`` does that on the way out;
    see :class:`~mainspring.providers.clients.LoopClients`). The bundled providers an
    agent builds are closed by ``Agent.aclose()``. A ``transport`` passed in is used by
    those clients and never closed here (its owner closes it).
    ``options`` are merged into every request body (a ``None`` value removes a key);
    ``headers`` are added to every request, after the provider's own.

    ``timeout`` bounds each phase (connect, write, pool, and ``read``: the longest
    silence between two chunks); ``request_timeout_s`` bounds the whole request, from
    connecting to the end of the stream (``None``: no total deadline). When it expires the
    stream raises a retryable :class:`ProviderError` naming the URL and the deadline.
    """

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        api_key: str | None,
        options: Mapping[str, Any] | None,
        timeout: TimeoutSpec,
        transport: httpx.AsyncBaseTransport | None,
        models: Mapping[str, Model] | Iterable[Model] | None,
        headers: Mapping[str, str] | None,
        request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
    ) -> None:
        if request_timeout_s is not None and not request_timeout_s > 0:
            raise ValueError(f"request_timeout_s must be positive or None, got {request_timeout_s}")
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.options: dict[str, Any] = dict(options or {})
        self.timeout = resolve_timeout(timeout)
        self.request_timeout_s = request_timeout_s
        self.models: dict[str, Model] = _catalogue(models)
        self._api_key = api_key or None
        self._extra_headers = dict(headers or {})
        borrowed = None if transport is None else BorrowedTransport(transport)
        self._clients = LoopClients(
            lambda: httpx.AsyncClient(transport=borrowed, timeout=self.timeout)
        )

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop (its pooled connections).

        Idempotent; a later request opens a new client. Clients made in other loops are
        closed when those loops shut down.
        """
        await self._clients.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r}, "
            f"api_key={key}, models={len(self.models)})"
        )

    def _auth_headers(self) -> dict[str, str]:
        """The provider's own headers (authentication, API version); override."""
        return {}

    def credentials_problem(self) -> str | None:
        """Why a request cannot be made as configured (a missing API key), or ``None``.

        Checked before every request; a problem is raised as a non-retryable
        :class:`ProviderError` before any connection is made. Override.
        """
        return None

    endpoint: str = ""
    """The streaming endpoint's path below ``base_url``; set by each provider."""

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``; override."""
        raise NotImplementedError

    def _stream_state(self, request: ModelRequest) -> WireStream:
        """A fresh decoder of this provider's stream events; override."""
        raise NotImplementedError

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[StreamEvent]:
        """Stream the reply to ``request``: POST, decode SSE events, map them to deltas."""
        problem = self.credentials_problem()
        if problem is not None:
            raise ProviderError(f"{self.name}: {problem}", retryable=False)
        body = self.request_body(request)
        state = self._stream_state(request)
        async with aclosing(self._sse(self.endpoint, body, signal, state)) as events:
            async for event in events:
                for out in state.feed(event):
                    yield out
                if state.done or signal.aborted:
                    return
        if not signal.aborted:
            for out in state.finish():
                yield out

    def _secrets(self) -> list[str]:
        secrets = [self._api_key] if self._api_key else []
        secrets += [v for k, v in self._extra_headers.items() if SECRET_HEADER.search(k)]
        return secrets

    def _body(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with :attr:`options` merged in at the top level."""
        for key, value in self.options.items():
            if value is None:
                body.pop(key, None)
            else:
                body[key] = value
        return body

    async def _sse(
        self,
        path: str,
        body: Mapping[str, Any],
        signal: AbortSignal,
        state: WireStream | None = None,
    ) -> AsyncGenerator[SSEEvent, None]:
        """POST ``body`` to ``path`` and yield the reply's SSE events.

        Ends early and quietly once ``signal`` is set, even while the server is silent;
        raises :class:`ProviderError` for every failure. The HTTP exchange runs in a
        helper task that is cancelled and awaited when this generator finishes, is
        closed, or is cancelled, so the response is always closed on the way out.
        Once ``state`` is done (the reply is complete), closing reads the rest of the
        response first, for up to :data:`DRAIN_S` seconds, so that its connection goes
        back to the pool (a server still sending after that has the connection closed);
        never after an abort or while the consumer is being cancelled.
        """
        if signal.aborted:
            return
        headers = httpx.Headers({"accept": "text/event-stream"})
        headers.update(self._auth_headers())
        headers.update(self._extra_headers)
        queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=_QUEUE_SIZE)
        worker = asyncio.create_task(
            self._pump(f"{self.base_url}{path}", headers, body, queue), name=f"{self.name}-http"
        )
        watcher = asyncio.create_task(_wake_on_abort(signal, queue), name=f"{self.name}-abort")
        try:
            while True:
                item = await queue.get()
                if signal.aborted or item is _Marker.END:
                    return
                if isinstance(item, Exception):
                    raise item
                if isinstance(item, list):
                    for event in item:
                        yield event
                        if signal.aborted:
                            return
        finally:
            try:
                if state is not None and state.done and not signal.aborted and not worker.done():
                    await _drain(queue)
            finally:  # also when the drain is cancelled (a closer that stopped waiting)
                worker.cancel()
                watcher.cancel()
                await asyncio.wait((worker, watcher))
                for task in (worker, watcher):
                    if not task.cancelled():
                        task.exception()  # retrieved: a failed helper is never logged as lost

    async def _pump(
        self,
        url: str,
        headers: httpx.Headers,
        body: Mapping[str, Any],
        queue: asyncio.Queue[_Item],
    ) -> None:
        item: _Item = _Marker.END
        total = asyncio.timeout(self.request_timeout_s)  # one timer for the whole request
        try:
            async with total:
                await self._exchange(url, headers, body, queue)
        except ProviderError as exc:
            item = exc
        except SSEError as exc:
            item = ProviderError(f"{self.name}: {exc}")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            item = error_from_transport(self.name, exc, self._secrets(), url=url)
        except TimeoutError:
            if total.expired():
                item = ProviderError(
                    f"{self.name}: the request to {self._redacted(url)} took longer than "
                    f"{self.request_timeout_s:g} s in all (request_timeout_s); the server "
                    "had not finished its reply",
                    retryable=True,
                )
            else:
                item = ProviderError(
                    f"{self.name}: read timeout: no data from {self._redacted(url)} "
                    f"for {self.timeout.read}s",
                    retryable=True,
                )
        except Exception as exc:  # a bug: handed to the consumer unchanged
            item = exc
        await queue.put(item)

    async def _exchange(
        self,
        url: str,
        headers: httpx.Headers,
        body: Mapping[str, Any],
        queue: asyncio.Queue[_Item],
    ) -> None:
        phases = (self.timeout.connect, self.timeout.write, self.timeout.read)
        first_byte = None if self.timeout.read is None else sum(p or 0.0 for p in phases)
        client = await self._clients.client()
        async with asyncio.timeout(first_byte) as deadline:
            async with client.stream("POST", url, headers=headers, json=body) as response:
                deadline.reschedule(None)
                await check_response(self.name, url, response, self.timeout.read, self._secrets())
                parser = SSEParser()
                chunks = response.aiter_bytes()
                read = self.timeout.read
                watch = None if read is None else ReadWatch(deadline, read)
                try:
                    while True:
                        if watch is not None:
                            watch.waiting()
                        try:
                            chunk = await anext(chunks)
                        except StopAsyncIteration:
                            break
                        if watch is not None:
                            watch.arrived()
                        events = parser.feed(chunk)
                        if events:
                            await queue.put(events)
                finally:
                    if watch is not None:
                        watch.cancel()
                events = parser.close()
                if events:
                    await queue.put(events)

    def _redacted(self, url: str) -> str:
        return redact(url, self._secrets())


async def _drain(queue: asyncio.Queue[_Item]) -> None:
    """Discard what the helper task still sends until it ends, for up to :data:`DRAIN_S`."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        return
    try:
        async with asyncio.timeout(DRAIN_S):
            while isinstance(await queue.get(), list):
                pass
    except TimeoutError:
        pass


async def _wake_on_abort(signal: AbortSignal, queue: asyncio.Queue[_Item]) -> None:
    await signal.wait()
    if not queue.full():
        queue.put_nowait(_Marker.WAKE)


def _catalogue(models: Mapping[str, Model] | Iterable[Model] | None) -> dict[str, Model]:
    if models is None:
        return {}
    if isinstance(models, Mapping):
        return dict(models)
    return {model.id: model for model in models}
