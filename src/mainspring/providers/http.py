"""Shared httpx plumbing for the HTTP providers: timeouts, errors, and an abortable SSE read.

Every failure leaves here as a :class:`~mainspring.providers.base.ProviderError`:

- HTTP status: 408, 409, 425, 429 and 5xx are retryable; every other non-2xx status
  (400, 401, 403, 404, 422, ...) is not. ``retry_after`` comes from ``retry-after-ms``
  or ``Retry-After`` (seconds or an HTTP date). A body naming an exhausted quota
  (``insufficient_quota``) is never retryable.
- Context overflow: an error whose text or code says the prompt does not fit (see
  :func:`is_context_overflow`) gets ``context_overflow=True`` and is not retryable.
- Transport errors (connect, read, write, pool timeouts, refused or reset connections,
  protocol errors) are retryable; a malformed URL or unsupported scheme is not.
- A server that stops sending is cut off after ``timeout.read`` seconds without a byte,
  enforced here per chunk (so it holds for any transport, mocks included).

Secrets never reach a message or a repr: the API key and credential-like header values
are replaced by ``***`` in every error text built here.
"""

from __future__ import annotations

import asyncio
import enum
import json
import math
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from contextlib import aclosing
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, TypeAlias

import httpx

from ..kernel.signal import AbortSignal
from .base import Model, ModelRequest, ProviderError, StreamEvent
from .sse import SSEError, SSEEvent, SSEParser

__all__ = [
    "DEFAULT_TIMEOUT",
    "HTTPProvider",
    "TimeoutSpec",
    "decode_event_json",
    "error_from_payload",
    "error_from_status",
    "error_from_transport",
    "is_context_overflow",
    "parse_retry_after",
    "resolve_timeout",
]

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=60.0, pool=10.0)
"""Seconds: ``read`` is the longest silence tolerated between two chunks of a reply."""

TimeoutSpec: TypeAlias = httpx.Timeout | float | Mapping[str, float | None] | None
"""An ``httpx.Timeout``, one number for all four phases, or a dict of the phases to change."""

MAX_ERROR_BODY_BYTES = 64 * 1024
_QUEUE_SIZE = 256
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_RETRYABLE_ERROR_TYPES = frozenset(
    {
        "api_error",
        "overloaded_error",
        "rate_limit_error",
        "rate_limit_exceeded",
        "server_error",
        "service_unavailable",
        "timeout_error",
        "unavailable_error",
    }
)
_FATAL_ERROR_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
_CONTEXT_OVERFLOW = re.compile(
    r"context_length_exceeded|context[_ ]window[_ ]exceeded|exceed_context_size"
    r"|maximum context length|prompt is too long|prompt too long|input is too long"
    r"|reduce the length of the messages"
    r"|exceed(?:s|ed|ing)?\s+(?:the\s+)?(?:available\s+|maximum\s+|model'?s?\s+)?context",
    re.IGNORECASE,
)
_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie", re.IGNORECASE)


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


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """The server's retry hint in seconds, or ``None``.

    ``retry-after-ms`` wins over ``Retry-After``; the latter may be seconds or an HTTP
    date (a date in the past gives ``0``). Unparseable or negative values are ignored.
    """
    millis = _non_negative(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _non_negative(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _non_negative(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def is_context_overflow(*texts: object) -> bool:
    """Whether any of ``texts`` (messages, error codes, types) says the prompt is too long."""
    return any(isinstance(text, str) and _CONTEXT_OVERFLOW.search(text) for text in texts)


def error_from_payload(
    provider: str,
    error: object,
    *,
    status_code: int | None = None,
    retry_after: float | None = None,
    secrets: Iterable[str] = (),
) -> ProviderError:
    """Map an error object (``{"type", "code", "message"}``, or a string) to an error.

    Used for HTTP error bodies and for errors a server sends inside a 200 stream; an
    integer ``code`` stands in for a missing ``status_code`` (llama.cpp does this).
    """
    message, kind, code = _describe(error)
    if status_code is None and isinstance(code, int) and 100 <= code <= 599:
        status_code = code
    overflow = is_context_overflow(message, kind, code)
    retryable = (
        not overflow
        and code not in _FATAL_ERROR_CODES
        and (
            (status_code is not None and _status_retryable(status_code))
            or kind in _RETRYABLE_ERROR_TYPES
            or code in _RETRYABLE_ERROR_TYPES
        )
    )
    label = kind if isinstance(kind, str) and kind else code if isinstance(code, str) else None
    prefix = f"HTTP {status_code}" if status_code is not None else "error"
    if label:
        prefix += f" ({label})"
    text = _truncate(redact(message or "no error message", secrets))
    return ProviderError(
        f"{provider}: {prefix}: {text}",
        retryable=retryable,
        status_code=status_code,
        retry_after=retry_after,
        context_overflow=overflow,
    )


def _describe(error: object) -> tuple[str, object, object]:
    if isinstance(error, Mapping):
        inner = error.get("error")
        if isinstance(inner, Mapping):
            return _describe(inner)
        if isinstance(inner, str):
            return inner, error.get("type"), error.get("code")
        message = error.get("message") or error.get("detail") or ""
        return str(message), error.get("type"), error.get("code")
    return (str(error) if error is not None else ""), None, None


def _status_retryable(status: int) -> bool:
    return status in _RETRYABLE_STATUS or status >= 500


def error_from_status(
    provider: str, status: int, headers: Mapping[str, str], body: str, secrets: Iterable[str] = ()
) -> ProviderError:
    """Map a non-2xx response with (the first part of) its ``body`` to an error."""
    try:
        payload: object = json.loads(body)
    except ValueError:
        payload = body.strip() or httpx.codes.get_reason_phrase(status)
    error = error_from_payload(
        provider,
        payload,
        status_code=status,
        retry_after=parse_retry_after(headers),
        secrets=secrets,
    )
    if not error.context_overflow and is_context_overflow(body):
        error.context_overflow, error.retryable = True, False
    return error


def error_from_transport(
    provider: str, exc: httpx.HTTPError | httpx.InvalidURL, secrets: Iterable[str] = ()
) -> ProviderError:
    """Wrap a transport failure; everything but a bad URL or protocol is retryable."""
    kinds: list[tuple[type[Exception], str]] = [
        (httpx.ConnectTimeout, "connect timeout"),
        (httpx.ReadTimeout, "read timeout"),
        (httpx.WriteTimeout, "write timeout"),
        (httpx.PoolTimeout, "connection pool timeout"),
        (httpx.ConnectError, "connection failed"),
        (httpx.RemoteProtocolError, "connection broken"),
        (httpx.NetworkError, "network error"),
    ]
    kind = next((label for cls, label in kinds if isinstance(exc, cls)), "transport error")
    fatal = (httpx.InvalidURL, httpx.UnsupportedProtocol, httpx.LocalProtocolError)
    detail = redact(str(exc), secrets) or type(exc).__name__
    return ProviderError(
        f"{provider}: {kind}: {_truncate(detail)}", retryable=not isinstance(exc, fatal)
    )


def decode_event_json(provider: str, event: SSEEvent) -> dict[str, Any]:
    """The JSON object in ``event.data``, or a :class:`ProviderError`.

    Data that does not parse is "stream ended before completion" (retryable) when the
    event was cut off by the end of the stream, and "invalid JSON" (not retryable) when
    the server sent it whole.
    """
    try:
        payload = json.loads(event.data)
    except ValueError:
        snippet = _truncate(event.data, 200)
        if not event.complete:
            raise ProviderError(
                f"{provider}: stream ended before completion (cut mid-event)", retryable=True
            ) from None
        raise ProviderError(f"{provider}: invalid JSON in stream: {snippet!r}") from None
    if not isinstance(payload, dict):
        raise ProviderError(
            f"{provider}: unexpected stream payload: {_truncate(event.data, 200)!r}"
        )
    return payload


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret of four or more characters replaced by ``***``."""
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def _truncate(text: str, limit: int = 1000) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


class _Marker(enum.Enum):
    END = "end"
    WAKE = "wake"


_Item: TypeAlias = SSEEvent | Exception | _Marker


class _BorrowedTransport(httpx.AsyncBaseTransport):
    """A caller's transport, used but never closed by the per-call clients."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        return None


class WireStream(Protocol):
    """Decodes one response's SSE events into stream events."""

    done: bool

    def feed(self, event: SSEEvent) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...


class HTTPProvider:
    """Base of the HTTP providers: configuration, redaction and the abortable SSE read.

    Each ``stream()`` call opens its own ``httpx.AsyncClient`` and closes it before
    returning, so a provider is bound to no event loop. A ``transport`` passed in is
    shared by those clients and never closed here (pass one, e.g. an
    ``httpx.AsyncHTTPTransport``, to reuse connections; its owner closes it).
    ``options`` are merged into every request body (a ``None`` value removes a key);
    ``headers`` are added to every request, after the provider's own.
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
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.options: dict[str, Any] = dict(options or {})
        self.timeout = resolve_timeout(timeout)
        self.models: dict[str, Model] = _catalogue(models)
        self._api_key = api_key or None
        self._extra_headers = dict(headers or {})
        self._transport = None if transport is None else _BorrowedTransport(transport)

    def __repr__(self) -> str:
        key = "'***'" if self._api_key else "None"
        return (
            f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r}, "
            f"api_key={key}, models={len(self.models)})"
        )

    def _auth_headers(self) -> dict[str, str]:
        """The provider's own headers (authentication, API version); override."""
        return {}

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
        body = self.request_body(request)
        state = self._stream_state(request)
        async with aclosing(self._sse(self.endpoint, body, signal)) as events:
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
        secrets += [v for k, v in self._extra_headers.items() if _SECRET_HEADER.search(k)]
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
        self, path: str, body: Mapping[str, Any], signal: AbortSignal
    ) -> AsyncGenerator[SSEEvent, None]:
        """POST ``body`` to ``path`` and yield the reply's SSE events.

        Ends early and quietly once ``signal`` is set, even while the server is silent;
        raises :class:`ProviderError` for every failure. The HTTP exchange runs in a
        helper task that is cancelled and awaited when this generator finishes, is
        closed, or is cancelled, so the response is always closed on the way out.
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
                if isinstance(item, SSEEvent):
                    yield item
        finally:
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
        try:
            await self._exchange(url, headers, body, queue)
        except ProviderError as exc:
            item = exc
        except SSEError as exc:
            item = ProviderError(f"{self.name}: {exc}")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            item = error_from_transport(self.name, exc, self._secrets())
        except TimeoutError:
            item = ProviderError(
                f"{self.name}: read timeout: no data from the server for {self.timeout.read}s",
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
        async with httpx.AsyncClient(transport=self._transport, timeout=self.timeout) as client:
            async with asyncio.timeout(first_byte) as deadline:
                async with client.stream("POST", url, headers=headers, json=body) as response:
                    deadline.reschedule(None)
                    await self._check(response)
                    parser = SSEParser()
                    chunks = response.aiter_bytes()
                    while True:
                        try:
                            async with asyncio.timeout(self.timeout.read):
                                chunk = await anext(chunks)
                        except StopAsyncIteration:
                            break
                        for event in parser.feed(chunk):
                            await queue.put(event)
                    for event in parser.close():
                        await queue.put(event)

    async def _check(self, response: httpx.Response) -> None:
        content_type = response.headers.get("content-type", "")
        if response.is_success and "json" not in content_type:
            return
        body = bytearray()
        chunks = response.aiter_bytes()
        while len(body) < MAX_ERROR_BODY_BYTES:
            # an error body is read under the read timeout too: a server that sends part
            # of it and then stalls still gets its error reported, with what arrived
            try:
                async with asyncio.timeout(self.timeout.read):
                    body += await anext(chunks)
            except (StopAsyncIteration, TimeoutError):
                break
        text = body[:MAX_ERROR_BODY_BYTES].decode("utf-8", errors="replace")
        if not response.is_success:
            raise error_from_status(
                self.name, response.status_code, response.headers, text, self._secrets()
            )
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        if isinstance(payload, Mapping) and "error" in payload:
            raise error_from_payload(self.name, payload, secrets=self._secrets())
        raise ProviderError(f"{self.name}: expected an event stream, got {content_type}")


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
