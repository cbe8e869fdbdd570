"""The HTTP providers against a real server on 127.0.0.1 that misbehaves.

- A whole request is bounded by ``request_timeout_s``: a server that trickles keep-alive
  comments or single bytes (each within the read timeout) is cut off at the deadline with
  a retryable error naming the URL, and the connection is closed.
- A successful reply that is not ``text/event-stream`` (an HTML page, plain text) is a
  non-retryable error naming the content type and the URL.
- A connection that cannot be made names the URL tried.
- Through an agent, each of these ends the run in an error message, with a valid event
  grammar.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import mainspring
from mainspring import AbortSignal
from mainspring.events import Retry
from mainspring.providers.anthropic import AnthropicProvider
from mainspring.providers.base import (
    Model,
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
)
from mainspring.providers.http import DEFAULT_REQUEST_TIMEOUT_S, HTTPProvider
from mainspring.providers.openai import OpenAIProvider
from mainspring.settings import ProviderSettings, RetrySettings, Settings
from mainspring.testing import EventRecorder, check_event_grammar

TRICKLE_FOR_S = 10.0  # how long a trickling server would go on if nobody cut it off
DEADLINE_S = 0.5
OPENAI_REPLY = (
    b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
    b'data: {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
_ANTHROPIC_EVENTS: list[dict[str, Any]] = [
    {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    {"type": "message_stop"},
]
ANTHROPIC_REPLY = "".join(
    f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in _ANTHROPIC_EVENTS
).encode()


@dataclass
class Reply:
    """What the server answers: ``head``, then ``trickle`` every ``interval`` s, then ``tail``."""

    content_type: str = "text/event-stream"
    head: bytes = b""
    trickle: bytes = b""
    interval: float = 0.1
    trickle_for: float = TRICKLE_FOR_S
    tail: bytes = b""
    requests: list[str] = field(default_factory=list)
    hung_up: threading.Event = field(default_factory=threading.Event)
    """Set when a write fails: the client closed the connection."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes
    server: _Server

    def do_POST(self) -> None:
        reply = self.server.reply
        self.rfile.read(int(self.headers.get("content-length", "0")))
        reply.requests.append(self.path)
        try:
            self.send_response(200)
            self.send_header("content-type", reply.content_type)
            self.end_headers()
            self._send(reply.head)
            if reply.trickle:
                for _ in range(round(reply.trickle_for / reply.interval)):
                    if self.server.stopping.wait(reply.interval):
                        return
                    self._send(reply.trickle)
            self._send(reply.tail)
        except OSError:  # broken pipe, reset: the client hung up
            reply.hung_up.set()

    def _send(self, data: bytes) -> None:
        if data:
            self.wfile.write(data)
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    reply: Reply
    stopping: threading.Event


@pytest.fixture
def serve() -> Iterator[Callable[[Reply], str]]:
    """Start a server on 127.0.0.1 answering with a :class:`Reply`; yields its base URL."""
    servers: list[tuple[_Server, threading.Thread]] = []

    def start(reply: Reply) -> str:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.reply, server.stopping = reply, threading.Event()
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server, thread in servers:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


Make = Callable[..., HTTPProvider]


def openai(base_url: str, **kwargs: Any) -> HTTPProvider:
    return OpenAIProvider(f"{base_url}/v1", "sk-test-key", **kwargs)


def anthropic(base_url: str, **kwargs: Any) -> HTTPProvider:
    return AnthropicProvider(base_url, "sk-ant-test-key", **kwargs)


PROVIDERS = [
    pytest.param(openai, "/v1/chat/completions", OPENAI_REPLY, id="openai"),
    pytest.param(anthropic, "/v1/messages", ANTHROPIC_REPLY, id="anthropic"),
]


def request_for(provider: HTTPProvider) -> ModelRequest:
    model = Model(provider=provider.name, id="m", max_output_tokens=100)
    return ModelRequest(model=model, messages=(mainspring.UserMessage(content="hi"),))


async def collect(provider: HTTPProvider, limit: float = 5.0) -> list[StreamEvent]:
    async with asyncio.timeout(limit):
        stream: AsyncIterator[StreamEvent] = provider.stream(request_for(provider), AbortSignal())
        return [event async for event in stream]


async def failure(provider: HTTPProvider) -> tuple[ProviderError, float]:
    """The error the stream raises and how long it took to come, in seconds."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ProviderError) as info:
        await collect(provider)
    return info.value, loop.time() - started


# ----------------------------------------------------------------- total deadline


@pytest.mark.parametrize(("make", "path", "reply"), PROVIDERS)
@pytest.mark.parametrize(
    "trickle",
    [pytest.param(b": keep-alive\n\n", id="comments"), pytest.param(b" ", id="bytes")],
)
async def test_a_trickling_server_is_cut_off_at_the_deadline(
    serve: Callable[[Reply], str], make: Make, path: str, reply: bytes, trickle: bytes
) -> None:
    # comments: only keep-alives; bytes: one byte of a data line that never ends
    head = b"" if trickle.startswith(b":") else b'data: {"choices": ['
    server = Reply(head=head, trickle=trickle)
    base_url = serve(server)
    error, elapsed = await failure(make(base_url, request_timeout_s=DEADLINE_S))

    assert f"took longer than {DEADLINE_S:g} s in all" in error.message
    assert f"{base_url}{path}" in error.message
    assert error.retryable
    assert DEADLINE_S <= elapsed < DEADLINE_S + 2 < TRICKLE_FOR_S
    # the connection was closed: the server's next write fails
    assert await asyncio.to_thread(server.hung_up.wait, 5)


@pytest.mark.parametrize(("make", "path", "reply"), PROVIDERS)
async def test_a_slow_reply_within_the_deadline_completes(
    serve: Callable[[Reply], str], make: Make, path: str, reply: bytes
) -> None:
    base_url = serve(Reply(trickle=b": keep-alive\n\n", trickle_for=0.3, tail=reply))
    events = await collect(make(base_url, request_timeout_s=5.0))
    assert TextDelta("hi") in events and isinstance(events[-1], StreamDone)


@pytest.mark.parametrize(("make", "path", "reply"), PROVIDERS)
async def test_no_total_deadline_with_none(
    serve: Callable[[Reply], str], make: Make, path: str, reply: bytes
) -> None:
    base_url = serve(Reply(trickle=b": keep-alive\n\n", trickle_for=0.6, tail=reply))
    provider = make(base_url, request_timeout_s=None)
    assert provider.request_timeout_s is None
    events = await collect(provider)
    assert isinstance(events[-1], StreamDone)


def test_the_deadline_defaults_to_600_s_and_must_be_positive() -> None:
    assert DEFAULT_REQUEST_TIMEOUT_S == 600
    assert OpenAIProvider("http://x/v1").request_timeout_s == DEFAULT_REQUEST_TIMEOUT_S
    assert AnthropicProvider("http://x").request_timeout_s == DEFAULT_REQUEST_TIMEOUT_S
    assert ProviderSettings().request_timeout_s == DEFAULT_REQUEST_TIMEOUT_S
    assert ProviderSettings(request_timeout_s=None).request_timeout_s is None
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="request_timeout_s"):
            OpenAIProvider("http://x/v1", request_timeout_s=bad)
        with pytest.raises(ValueError, match="request_timeout_s"):
            ProviderSettings(request_timeout_s=bad)


# ------------------------------------------------------------ not an event stream


@pytest.mark.parametrize(("make", "path", "reply"), PROVIDERS)
@pytest.mark.parametrize(
    ("content_type", "named"),
    [
        ("text/html; charset=utf-8", "text/html"),
        ("text/plain", "text/plain"),
        ("application/octet-stream", "application/octet-stream"),
    ],
)
async def test_a_200_reply_that_is_not_an_event_stream_is_refused(
    serve: Callable[[Reply], str],
    make: Make,
    path: str,
    reply: bytes,
    content_type: str,
    named: str,
) -> None:
    # even a body that would parse as a stream: the content type decides
    body = reply if content_type == "text/plain" else b"<html><body>Sign in</body></html>"
    base_url = serve(Reply(content_type=content_type, head=body))
    error, _ = await failure(make(base_url))
    assert f"got {named}" in error.message
    assert f"{base_url}{path}" in error.message
    assert "base URL" in error.message
    assert not error.retryable


@pytest.mark.parametrize(("make", "path", "reply"), PROVIDERS)
async def test_an_event_stream_with_parameters_is_accepted(
    serve: Callable[[Reply], str], make: Make, path: str, reply: bytes
) -> None:
    base_url = serve(Reply(content_type="Text/Event-Stream; charset=utf-8", head=reply))
    events = await collect(make(base_url))
    assert isinstance(events[-1], StreamDone)


# -------------------------------------------------------------- connection errors


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize(("make", "path", "reply"), PROVIDERS)
async def test_a_refused_connection_names_the_url(make: Make, path: str, reply: bytes) -> None:
    base_url = f"http://127.0.0.1:{_closed_port()}"
    error, _ = await failure(make(base_url))
    assert "connection failed" in error.message
    assert f"{base_url}{path}" in error.message
    assert error.retryable


# ------------------------------------------------------------------- whole agent


async def _run(provider: HTTPProvider, settings: Settings) -> EventRecorder:
    agent = mainspring.Agent(
        model=f"{provider.name}:m", provider=provider, autoload=False, settings=settings
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    async with asyncio.timeout(10):
        await agent.prompt("hi")
    check_event_grammar(recorder.events)
    return recorder


@pytest.mark.parametrize(("make", "path", "reply"), PROVIDERS)
async def test_an_agent_run_against_a_trickling_server_ends_in_an_error_message(
    serve: Callable[[Reply], str], make: Make, path: str, reply: bytes
) -> None:
    server = Reply(trickle=b": keep-alive\n\n")
    base_url = serve(server)
    retry_once = Settings(retry=RetrySettings(max_attempts=1, base_delay_s=0.01))
    recorder = await _run(make(base_url, request_timeout_s=DEADLINE_S), retry_once)

    message = recorder.messages("assistant")[-1]
    assert message.stop_reason == "error"
    assert "took longer than 0.5 s in all" in (message.error_message or "")
    assert len(recorder.of_type(Retry)) == 1 and len(server.requests) == 2


@pytest.mark.parametrize(("make", "path", "reply"), PROVIDERS)
async def test_an_agent_run_against_an_html_page_ends_in_an_error_without_retry(
    serve: Callable[[Reply], str], make: Make, path: str, reply: bytes
) -> None:
    server = Reply(content_type="text/html", head=b"<html>It works!</html>")
    base_url = serve(server)
    recorder = await _run(make(base_url), Settings(retry=RetrySettings(base_delay_s=0.01)))

    message = recorder.messages("assistant")[-1]
    assert message.stop_reason == "error"
    assert "got text/html" in (message.error_message or "")
    assert recorder.of_type(Retry) == [] and len(server.requests) == 1
