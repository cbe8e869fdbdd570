"""The HTTP providers' connections, against a real keep-alive server on 127.0.0.1.

- Requests made from one event loop share one client, so two requests in a row use one
  connection.
- A provider used from successive ``asyncio.run()`` calls works in each, with a new
  connection each time; the loop's shutdown closes the client it made.
- ``provider.aclose()`` / ``async with provider`` close the pooled connection, and a
  later request opens a new one; ``Agent.aclose()`` closes the bundled providers the
  agent built.
- The read timeout is the longest silence between two chunks, not a bound on the reply.
- A server that sends an endless line gets a clear error, not all the memory.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

import mainspring
from mainspring import AbortSignal
from mainspring.providers.anthropic import AnthropicProvider
from mainspring.providers.base import Model, ModelRequest, ProviderError, StreamEvent, TextDelta
from mainspring.providers.http import HTTPProvider
from mainspring.providers.openai import OpenAIProvider
from mainspring.settings import ProviderSettings, Settings

OPENAI_REPLY = (
    b'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
    b'data: {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
ANTHROPIC_REPLY = (
    b'event: message_start\ndata: {"type": "message_start", "message": {"id": "m1"}}\n\n'
    b'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
    b'"content_block": {"type": "text"}}\n\n'
    b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
    b'"delta": {"type": "text_delta", "text": "hi"}}\n\n'
    b'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": '
    b'"end_turn"}}\n\n'
    b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
)
WAIT_S = 5.0  # the longest a condition on the server side is waited for


@dataclass
class Counts:
    """What the server saw: connections opened and closed, requests answered."""

    opened: int = 0
    closed: int = 0
    requests: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_closed(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.closed >= count, WAIT_S)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the connection outlives a request
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.counts.changed:
            self.server.counts.opened += 1

    def finish(self) -> None:
        super().finish()
        with self.server.counts.changed:
            self.server.counts.closed += 1
            self.server.counts.changed.notify_all()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        with self.server.counts.changed:  # counted before the reply: the client sees it
            self.server.counts.requests += 1
        reply = ANTHROPIC_REPLY if self.path.endswith("/messages") else OPENAI_REPLY
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    counts: Counts


@pytest.fixture
def server() -> Iterator[tuple[str, Counts]]:
    """A keep-alive server on 127.0.0.1: its base URL and what it counted."""
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.counts = Counts()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.counts
    httpd.shutdown()
    httpd.server_close()
    thread.join(WAIT_S)


def openai(base_url: str) -> HTTPProvider:
    return OpenAIProvider(f"{base_url}/v1", "sk-test-key")


def anthropic(base_url: str) -> HTTPProvider:
    return AnthropicProvider(base_url, "sk-ant-test-key")


MAKERS = [pytest.param(openai, id="openai"), pytest.param(anthropic, id="anthropic")]


def request_for(provider: HTTPProvider) -> ModelRequest:
    model = Model(provider=provider.name, id="m", max_output_tokens=100)
    return ModelRequest(model=model, messages=(mainspring.UserMessage(content="hi"),))


async def text_of(provider: HTTPProvider) -> str:
    async with asyncio.timeout(WAIT_S):
        stream: AsyncIterator[StreamEvent] = provider.stream(request_for(provider), AbortSignal())
        return "".join([e.text async for e in stream if isinstance(e, TextDelta)])


@pytest.mark.parametrize("make", MAKERS)
async def test_two_requests_in_one_loop_share_one_connection(
    server: tuple[str, Counts], make: Any
) -> None:
    base_url, counts = server
    async with make(base_url) as provider:
        assert [await text_of(provider), await text_of(provider)] == ["hi", "hi"]
        assert (counts.requests, counts.opened) == (2, 1)
    assert counts.wait_closed(1)  # leaving `async with` closed the pooled connection


def test_successive_asyncio_runs_each_get_a_client_closed_with_their_loop(
    server: tuple[str, Counts],
) -> None:
    base_url, counts = server
    provider = openai(base_url)
    for run in (1, 2):
        assert asyncio.run(text_of(provider)) == "hi"
        # the loop's shutdown closed that loop's client: its connection is gone, and the
        # next run cannot reuse a client bound to a closed loop
        assert counts.wait_closed(run)
    assert (counts.requests, counts.opened) == (2, 2)


async def test_a_request_after_aclose_opens_a_new_connection(server: tuple[str, Counts]) -> None:
    base_url, counts = server
    provider = openai(base_url)
    assert await text_of(provider) == "hi"
    await provider.aclose()
    await provider.aclose()  # idempotent
    assert counts.wait_closed(1)
    assert await text_of(provider) == "hi"
    assert (counts.requests, counts.opened) == (2, 2)
    await provider.aclose()
    assert counts.wait_closed(2)


async def test_agent_aclose_closes_the_bundled_provider_it_built(
    server: tuple[str, Counts],
) -> None:
    base_url, counts = server
    settings = Settings(
        providers={"openai": ProviderSettings(base_url=f"{base_url}/v1", api_key="sk-test-key")}
    )
    agent = mainspring.Agent(model="openai:gpt-test", autoload=False, settings=settings)
    await agent.prompt("hi")
    await agent.prompt("again")
    assert agent.state.messages[-1].text == "hi"
    assert (counts.requests, counts.opened, counts.closed) == (2, 1, 0)
    await agent.aclose()
    assert counts.wait_closed(1)


async def test_an_agent_that_never_used_a_provider_closes_cleanly() -> None:
    agent = mainspring.Agent(model="faux:m", autoload=False)
    await agent.aclose()
    assert not agent.providers["openai"].built  # closing built nothing


class _Paced(httpx.AsyncByteStream):
    """``chunks``, one every ``interval`` seconds (the server's pace, not a wait)."""

    def __init__(self, chunks: list[bytes], interval: float) -> None:
        self._chunks, self._interval = chunks, interval

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            await asyncio.sleep(self._interval)
            yield chunk


def _streaming(stream: httpx.AsyncByteStream) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)

    return httpx.MockTransport(handle)


def _paced(chunks: list[bytes], *, interval: float, read_timeout: float) -> HTTPProvider:
    transport = _streaming(_Paced(chunks, interval))
    return OpenAIProvider(
        "http://llm.test/v1", "k", transport=transport, timeout={"read": read_timeout}
    )


async def test_the_read_timeout_bounds_each_silence_not_the_whole_reply() -> None:
    # eight gaps of 40 ms under a read timeout of 150 ms: 320 ms in all, never silent for long
    delta = 'data: {"choices": [{"index": 0, "delta": {"content": "%d"}}]}\n\n'
    pieces = [delta % i for i in range(7)]
    body = [p.encode() for p in pieces] + [OPENAI_REPLY]
    provider = _paced(body, interval=0.04, read_timeout=0.15)
    assert await text_of(provider) == "0123456hi"


async def test_a_silence_longer_than_the_read_timeout_is_cut_off() -> None:
    provider = _paced([OPENAI_REPLY[:40], OPENAI_REPLY[40:]], interval=0.5, read_timeout=0.05)
    with pytest.raises(ProviderError, match="read timeout") as info:
        await text_of(provider)
    assert info.value.retryable


class _EndlessLine(httpx.AsyncByteStream):
    """``data: xxxx…`` without a line end, 64 KiB at a time, for as long as it is read."""

    def __init__(self) -> None:
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"data: "
        while True:
            self.sent += 1
            yield b"x" * 65536


@pytest.mark.parametrize("make", MAKERS)
async def test_an_endless_line_is_a_clear_error_not_unbounded_memory(make: Any) -> None:
    stream = _EndlessLine()
    provider = make("http://llm.test")
    provider = type(provider)(
        provider.base_url, "k", transport=_streaming(stream), request_timeout_s=None
    )
    with pytest.raises(ProviderError, match="line longer than 16777216 characters"):
        await text_of(provider)
    assert stream.sent <= 16 * 1024 * 1024 // 65536 + 1  # read no further than the cap
