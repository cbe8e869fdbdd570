"""AnthropicProvider against replayed Messages API streams (httpx.MockTransport)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mainspring import (
    AbortSignal,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mainspring.messages import Usage
from mainspring.providers.anthropic import AnthropicProvider
from mainspring.providers.base import (
    Model,
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageReport,
)

FIXTURES = Path(__file__).parent / "fixtures" / "sse"
KEY = "sk-ant-test-SECRET-0123456789"
MODEL = Model(provider="anthropic", id="claude-x", max_output_tokens=16_000)
REQUEST = ModelRequest(model=MODEL, messages=(UserMessage(content="hi"),))


class Body(httpx.AsyncByteStream):
    """A response body sent in chunks, then ended or hung until cancelled."""

    def __init__(self, data: bytes, *, chunk: int = 0, hang: bool = False) -> None:
        size = chunk or max(len(data), 1)
        self.chunks = [data[i : i + size] for i in range(0, len(data), size)]
        self.hang = hang
        self.hanging = asyncio.Event()
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.chunks:
            yield piece
        if self.hang:
            self.hanging.set()
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


class Server:
    """Answers every request with one canned response and records the requests."""

    def __init__(
        self,
        data: str = "",
        *,
        status: int = 200,
        content_type: str = "text/event-stream",
        headers: dict[str, str] | None = None,
        **body: Any,
    ) -> None:
        self.body = Body(data.encode(), **body)
        self.status = status
        self.headers = {"content-type": content_type, **(headers or {})}
        self.requests: list[httpx.Request] = []
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.status, headers=self.headers, stream=self.body)

    @property
    def sent(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.requests[-1].content)
        return result


def fixture(name: str | Path) -> str:
    return (FIXTURES / name).read_text()


def provider(server: Server, **kwargs: Any) -> AnthropicProvider:
    kwargs.setdefault("api_key", KEY)
    return AnthropicProvider("http://claude.test", transport=server.transport, **kwargs)


async def collect(
    p: AnthropicProvider, request: ModelRequest = REQUEST, signal: AbortSignal | None = None
) -> list[StreamEvent]:
    async with asyncio.timeout(5):
        return [e async for e in p.stream(request, signal or AbortSignal())]


async def failure(p: AnthropicProvider, request: ModelRequest = REQUEST) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await collect(p, request)
    return info.value


def sse(*payloads: dict[str, Any] | str) -> str:
    out = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        kind = "" if isinstance(payload, str) else f"event: {payload['type']}\n"
        out.append(f"{kind}data: {data}\n\n")
    return "".join(out)


START = {
    "type": "message_start",
    "message": {"id": "msg_1", "usage": {"input_tokens": 5, "output_tokens": 1}},
}


def tool_start(index: int, call_id: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_use", "id": call_id, "name": "f"}
    if given is not None:
        block["input"] = given
    return {"type": "content_block_start", "index": index, "content_block": block}


def json_delta(index: int, fragment: str) -> dict[str, Any]:
    delta = {"type": "input_json_delta", "partial_json": fragment}
    return {"type": "content_block_delta", "index": index, "delta": delta}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(reason: str | None, output_tokens: int = 7) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


MESSAGE_STOP = {"type": "message_stop"}

# --- replies ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [0, 1, 9])
async def test_text_reply(chunk_size: int) -> None:
    server = Server(fixture("anthropic_text.txt"), chunk=chunk_size)
    events = await collect(provider(server))
    assert events == [
        UsageReport(Usage(input_tokens=25, output_tokens=1)),
        TextDelta("Hello"),
        TextDelta(", wörld"),
        UsageReport(Usage(input_tokens=25, output_tokens=15)),
        StreamDone("stop", "msg_01TextReply"),
    ]
    assert server.body.closed


async def test_thinking_with_signature_and_parallel_tool_use() -> None:
    priced = MODEL.model_copy(update={"cost_cache_read_per_mtok": 0.5})
    request = REQUEST.model_copy(update={"model": priced})
    events = await collect(provider(Server(fixture("anthropic_thinking_tool_use.txt"))), request)
    usage = Usage(input_tokens=40, output_tokens=3, cache_read_tokens=2000, cache_write_tokens=100)
    final = usage.model_copy(update={"output_tokens": 89})
    assert events == [
        UsageReport(usage.model_copy(update={"cost_usd": priced.cost(usage)})),
        ThinkingDelta("I should read"),
        ThinkingDelta(" both files."),
        ThinkingDelta("", "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"),
        TextDelta("Reading them now."),
        ToolCallStart("toolu_01A", "read_file"),
        ToolCallDelta("toolu_01A", '{"path": "a'),
        ToolCallDelta("toolu_01A", '.txt"}'),
        ToolCallEnd("toolu_01A"),
        ToolCallStart("toolu_01B", "read_file"),
        ToolCallDelta("toolu_01B", '{"path": "b.txt"}'),
        ToolCallEnd("toolu_01B"),
        UsageReport(final.model_copy(update={"cost_usd": priced.cost(final)})),
        StreamDone("tool_use", "msg_01ThinkTools"),
    ]


async def test_block_stops_all_at_the_end() -> None:
    body = sse(
        START,
        tool_start(0, "t0"),
        json_delta(0, "{}"),
        tool_start(1, "t1"),
        json_delta(1, '{"a": 1}'),
        stop(0),
        stop(1),
        message_delta("tool_use"),
        MESSAGE_STOP,
    )
    events = await collect(provider(Server(body)))
    kinds = [(type(e).__name__, getattr(e, "id", None)) for e in events[1:-2]]
    assert kinds == [
        ("ToolCallStart", "t0"),
        ("ToolCallDelta", "t0"),
        ("ToolCallStart", "t1"),
        ("ToolCallDelta", "t1"),
        ("ToolCallEnd", "t0"),
        ("ToolCallEnd", "t1"),
    ]


async def test_block_stops_never_sent() -> None:
    body = sse(
        START, tool_start(0, "t0"), json_delta(0, "{}"), message_delta("tool_use"), MESSAGE_STOP
    )
    events = await collect(provider(Server(body)))
    assert events[1:4] == [ToolCallStart("t0", "f"), ToolCallDelta("t0", "{}"), ToolCallEnd("t0")]
    assert events[-1] == StreamDone("tool_use", "msg_1")


async def test_input_given_whole_in_block_start() -> None:
    body = sse(
        START, tool_start(0, "t0", {"x": 1}), stop(0), message_delta("tool_use"), MESSAGE_STOP
    )
    events = await collect(provider(Server(body)))
    assert events[1:4] == [
        ToolCallStart("t0", "f"),
        ToolCallDelta("t0", '{"x": 1}'),
        ToolCallEnd("t0"),
    ]


async def test_tool_use_without_id_gets_one() -> None:
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "name": "f"},
    }
    body = sse(START, block, stop(0), message_delta("tool_use"), MESSAGE_STOP)
    events = await collect(provider(Server(body)))
    start = events[1]
    assert isinstance(start, ToolCallStart) and start.id.startswith("toolu_")
    assert events[2] == ToolCallEnd(start.id)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_use"),
        ("something_new", "stop"),
    ],
)
async def test_stop_reasons(reason: str, expected: str) -> None:
    events = await collect(provider(Server(sse(START, message_delta(reason), MESSAGE_STOP))))
    assert events[-1] == StreamDone(expected, "msg_1")  # type: ignore[arg-type]


async def test_refusal_is_a_non_retryable_error() -> None:
    error = await failure(provider(Server(sse(START, message_delta("refusal"), MESSAGE_STOP))))
    assert "refused" in error.message and not error.retryable


async def test_stream_ending_after_message_delta_is_accepted() -> None:
    events = await collect(provider(Server(sse(START, message_delta("end_turn")))))
    assert events[-1] == StreamDone("stop", "msg_1")


async def test_recorded_llama_cpp_transcripts_replay() -> None:
    text = await collect(provider(Server(fixture("local_anthropic_text.txt"), chunk=13)))
    assert "".join(e.text for e in text if isinstance(e, TextDelta)) == "Two and two equals five."
    assert isinstance(text[-1], StreamDone) and text[-1].stop_reason == "stop"
    tools = await collect(provider(Server(fixture("local_anthropic_tool_call.txt"), chunk=13)))
    starts = [e.id for e in tools if isinstance(e, ToolCallStart)]
    assert len(starts) == 2 and [e.id for e in tools if isinstance(e, ToolCallEnd)] == starts
    for call_id in starts:
        fragments = [
            e.arguments_json_fragment
            for e in tools
            if isinstance(e, ToolCallDelta) and e.id == call_id
        ]
        assert json.loads("".join(fragments)) == {"city": "Paris"}
    assert isinstance(tools[-1], StreamDone) and tools[-1].stop_reason == "tool_use"


# --- request -----------------------------------------------------------------------------


async def test_request_body_shape() -> None:
    image = ImageContent(data="aGk=", mime_type="image/jpeg")
    transcript = (
        UserMessage(content=(TextContent(text="look"), TextContent(text=""), image)),
        AssistantMessage(
            content=(
                ThinkingContent(thinking="signed", signature="sig-1"),
                ThinkingContent(thinking="unsigned"),
                TextContent(text="Reading."),
                ToolCall(id="t1", name="read", arguments={"path": "a"}),
                ToolCall(id="t2", name="shot"),
            )
        ),
        ToolResultMessage(tool_call_id="t1", tool_name="read", content=(TextContent(text="A"),)),
        ToolResultMessage(tool_call_id="t2", tool_name="shot", content=(image,), is_error=True),
        AssistantMessage(content=(ThinkingContent(thinking="no signature"),)),
        UserMessage(content="thanks"),
    )
    tool = ToolSpec(name="read", description="Read a file", parameters={"type": "object"})
    request = ModelRequest(
        model=MODEL, system_prompt="Be brief.", messages=transcript, tools=(tool,)
    )
    server = Server(fixture("anthropic_text.txt"))
    await collect(provider(server, options={"temperature": 0.5}), request)
    sent = server.sent
    assert str(server.requests[-1].url) == "http://claude.test/v1/messages"
    source = {"type": "base64", "media_type": "image/jpeg", "data": "aGk="}
    assert sent == {
        "model": "claude-x",
        "max_tokens": 16_000,
        "stream": True,
        "system": "Be brief.",
        "temperature": 0.5,
        "tools": [
            {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}
        ],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "look"}, {"type": "image", "source": source}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "signed", "signature": "sig-1"},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "t2", "name": "shot", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "A"}],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "content": [{"type": "image", "source": source}],
                        "is_error": True,
                    },
                ],
            },
            {"role": "user", "content": "thanks"},
        ],
    }
    headers = server.requests[-1].headers
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers


@pytest.mark.parametrize(
    ("level", "max_tokens", "budget"),
    [
        ("minimal", 16_000, 1024),
        ("medium", 16_000, 10_000),
        ("high", 16_000, 14_976),
        ("low", 1500, None),
    ],
)
async def test_thinking_budget(level: str, max_tokens: int, budget: int | None) -> None:
    model = MODEL.model_copy(update={"reasoning": True, "max_output_tokens": max_tokens})
    server = Server(fixture("anthropic_text.txt"))
    await collect(provider(server), ModelRequest(model=model, thinking_level=level))  # type: ignore[arg-type]
    expected = None if budget is None else {"type": "enabled", "budget_tokens": budget}
    assert server.sent.get("thinking") == expected


async def test_no_thinking_for_non_reasoning_models() -> None:
    server = Server(fixture("anthropic_text.txt"))
    await collect(provider(server), ModelRequest(model=MODEL, thinking_level="high"))
    assert "thinking" not in server.sent


async def test_environment_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://proxy.test/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key-456")
    server = Server(fixture("anthropic_text.txt"))
    p = AnthropicProvider(transport=server.transport)
    await collect(p)
    assert str(server.requests[-1].url) == "http://proxy.test/v1/messages"
    assert server.requests[-1].headers["x-api-key"] == "env-key-456"
    assert p.name == "anthropic" and "env-key-456" not in repr(p)


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    p = AnthropicProvider(models={"claude-x": MODEL})
    assert p.base_url == "https://api.anthropic.com"
    assert p.models == {"claude-x": MODEL}
    assert "x-api-key" not in p._auth_headers()


def test_repr_redacts_the_key() -> None:
    p = provider(Server())
    assert KEY not in repr(p) and "***" in repr(p)


# --- failures ----------------------------------------------------------------------------


async def test_overloaded_error_event_is_retryable() -> None:
    events: list[StreamEvent] = []
    with pytest.raises(ProviderError) as info:
        async with asyncio.timeout(5):
            async for event in provider(Server(fixture("anthropic_overloaded.txt"))).stream(
                REQUEST, AbortSignal()
            ):
                events.append(event)
    assert TextDelta("Partial") in events
    assert info.value.retryable and "overloaded_error" in info.value.message


@pytest.mark.parametrize(
    ("kind", "retryable"),
    [("api_error", True), ("rate_limit_error", True), ("invalid_request_error", False)],
)
async def test_error_event_types(kind: str, retryable: bool) -> None:
    error_event = {"type": "error", "error": {"type": kind, "message": "m"}}
    error = await failure(provider(Server(sse(START, error_event))))
    assert error.retryable is retryable


async def test_prompt_too_long_is_a_context_overflow() -> None:
    body = json.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000",
            },
        }
    )
    error = await failure(provider(Server(body, status=400, content_type="application/json")))
    assert error.context_overflow and not error.retryable and error.status_code == 400
    in_stream = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long"},
    }
    assert (await failure(provider(Server(sse(START, in_stream))))).context_overflow


@pytest.mark.parametrize(
    ("status", "retryable"), [(529, True), (500, True), (401, False), (429, True)]
)
async def test_http_errors(status: int, retryable: bool) -> None:
    body = json.dumps({"type": "error", "error": {"type": "some_error", "message": f"echo {KEY}"}})
    server = Server(
        body, status=status, content_type="application/json", headers={"retry-after": "3"}
    )
    error = await failure(provider(server))
    assert error.retryable is retryable and error.status_code == status
    assert error.retry_after == 3.0
    assert KEY not in error.message


async def test_stream_without_stop_is_retryable() -> None:
    error = await failure(provider(Server(sse(START, tool_start(0, "t"), json_delta(0, "{")))))
    assert error.message == "anthropic: stream ended before completion" and error.retryable


@pytest.mark.parametrize(
    "body",
    [
        sse(MESSAGE_STOP),
        sse({"type": "ping"}, MESSAGE_STOP),
        sse(message_delta("end_turn"), MESSAGE_STOP),
        sse(message_delta("end_turn")),
    ],
    ids=["stop-only", "ping-stop", "delta-stop", "delta-only"],
)
async def test_stream_without_a_message_is_an_error(body: str) -> None:
    error = await failure(provider(Server(body)))
    assert error.message == "anthropic: the stream ended without a message (no message_start)"
    assert not error.retryable


async def test_a_message_without_content_is_still_a_reply() -> None:
    events = await collect(provider(Server(sse(START, message_delta("end_turn"), MESSAGE_STOP))))
    assert events[-1] == StreamDone("stop", "msg_1")


async def test_cut_mid_event_is_retryable() -> None:
    body = sse(START) + 'event: content_block_delta\ndata: {"type":"content_blo'
    error = await failure(provider(Server(body)))
    assert "stream ended before completion" in error.message and error.retryable


async def test_invalid_json_is_an_error() -> None:
    error = await failure(provider(Server(sse(START) + "event: ping\ndata: {oops}\n\n")))
    assert "invalid JSON" in error.message


async def test_read_timeout() -> None:
    server = Server(sse(START), hang=True)
    error = await failure(provider(server, timeout=httpx.Timeout(5.0, read=0.05)))
    assert error.retryable and "read timeout" in error.message
    assert server.body.closed


async def test_abort_while_silent() -> None:
    server = Server(sse(START), hang=True)
    signal = AbortSignal()
    task = asyncio.create_task(collect(provider(server), signal=signal))
    async with asyncio.timeout(5):
        await server.body.hanging.wait()
    signal.set()
    async with asyncio.timeout(1):
        events = await task
    assert events == [UsageReport(Usage(input_tokens=5, output_tokens=1))]
    assert server.body.closed
    assert asyncio.all_tasks() == {asyncio.current_task()}
