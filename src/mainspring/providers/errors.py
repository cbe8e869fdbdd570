"""Mapping failures to :class:`~mainspring.providers.base.ProviderError`, with secrets redacted.

- HTTP status: 408, 409, 425, 429 and 5xx are retryable; every other non-2xx status
  (400, 401, 403, 404, 422, ...) is not. ``retry_after`` comes from ``retry-after-ms``
  or ``Retry-After`` (seconds or an HTTP date). A body naming an exhausted quota
  (``insufficient_quota``) is never retryable.
- Context overflow: an error whose text or code says the prompt does not fit (see
  :func:`is_context_overflow`) gets ``context_overflow=True`` and is not retryable.
- Transport errors (connect, read, write, pool timeouts, refused or reset connections,
  protocol errors) are retryable; a malformed URL or unsupported scheme is not. Their
  message names the URL tried.

Secrets never reach a message: every secret handed in (the API key, credential-like
header values) is replaced by ``***`` in every error text built here.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from .base import ProviderError
from .sse import SSEEvent

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "SECRET_HEADER",
    "check_response",
    "decode_event_json",
    "error_from_payload",
    "error_from_status",
    "error_from_transport",
    "is_context_overflow",
    "parse_retry_after",
    "redact",
]

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
SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie", re.IGNORECASE)
"""Header names whose values are treated as secrets."""


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
    url: str | None = None,
) -> ProviderError:
    """Map an error object (``{"type", "code", "message"}``, or a string) to an error.

    Used for HTTP error bodies and for errors a server sends inside a 200 stream; an
    integer ``code`` stands in for a missing ``status_code`` (llama.cpp does this). The
    message names ``url`` when given (redacted), so a wrong base URL shows in a 404.
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
    if url is not None:
        prefix += f" from {redact(url, secrets)}"
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
    provider: str,
    status: int,
    headers: Mapping[str, str],
    body: str,
    secrets: Iterable[str] = (),
    *,
    url: str | None = None,
) -> ProviderError:
    """Map a non-2xx response with (the first part of) its ``body`` to an error.

    The message names ``url``, the address requested, when given.
    """
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
        url=url,
    )
    if not error.context_overflow and is_context_overflow(body):
        error.context_overflow, error.retryable = True, False
    return error


def error_from_transport(
    provider: str,
    exc: httpx.HTTPError | httpx.InvalidURL,
    secrets: Iterable[str] = (),
    *,
    url: str | None = None,
) -> ProviderError:
    """Wrap a transport failure; everything but a bad URL or protocol is retryable.

    The message names the URL tried: ``url``, else the failed request's when ``exc``
    carries one (redacted like the rest of the text).
    """
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
    if url is None and isinstance(exc, httpx.RequestError):
        try:
            url = str(exc.request.url)
        except RuntimeError:  # raised outside a request: no URL to name
            url = None
    where = f" ({redact(url, secrets)})" if url else ""
    detail = redact(str(exc), secrets) or type(exc).__name__
    return ProviderError(
        f"{provider}: {kind}{where}: {_truncate(detail)}", retryable=not isinstance(exc, fatal)
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


MAX_ERROR_BODY_BYTES = 64 * 1024
"""How much of an error body is read (and mapped); the rest is not read."""


async def check_response(
    name: str, url: str, response: httpx.Response, read_timeout: float | None, secrets: list[str]
) -> None:
    """Raise unless ``response`` is a successful event stream.

    A failed status maps its body (see :func:`error_from_status`); a successful JSON
    body carrying an error object maps that error; any other successful content type
    is a non-retryable error naming it and ``url``, read no further. The body is read
    under ``read_timeout`` per chunk: a server that sends part of an error body and then
    stalls still gets its error reported, with what arrived.
    """
    media_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if response.is_success:
        if media_type == "text/event-stream":
            return
        if not media_type.endswith("json"):
            raise _not_a_stream(name, url, media_type, secrets)
    body = bytearray()
    chunks = response.aiter_bytes()
    while len(body) < MAX_ERROR_BODY_BYTES:
        try:
            async with asyncio.timeout(read_timeout):
                body += await anext(chunks)
        except (StopAsyncIteration, TimeoutError):
            break
    text = body[:MAX_ERROR_BODY_BYTES].decode("utf-8", errors="replace")
    if not response.is_success:
        raise error_from_status(
            name, response.status_code, response.headers, text, secrets, url=url
        )
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, Mapping) and "error" in payload:
        raise error_from_payload(name, payload, secrets=secrets, url=url)
    raise _not_a_stream(name, url, media_type, secrets)


def _not_a_stream(name: str, url: str, media_type: str, secrets: list[str]) -> ProviderError:
    return ProviderError(
        f"{name}: expected an event stream (text/event-stream) from "
        f"{redact(url, secrets)}, got {media_type or 'no content type'}; "
        "is the base URL right?"
    )
