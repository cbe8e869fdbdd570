"""OpenAIProvider against replayed Chat Completions streams (httpx.MockTransport)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any, cast

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
from mainspring.providers.http import DEFAULT_TIMEOUT
from mainspring.providers.openai import OpenAIProvider

FIXTURES = Path(__file__).parent / "fixtures" / "sse"
KEY = "sk-test-SECRET-0123456789"
MODEL = Model(provider="openai", id="gpt-x", max_output_tokens=1000)
REQUEST = ModelRequest(model=MODEL, messages=(UserMessage(content="hi"),))


class Body(httpx.AsyncByteStream):
    """A response body sent in chunks; then it ends, raises, or hangs until cancelled."""

    def __init__(
        self, data: bytes, *, chunk: int = 0, hang: bool = False, error: Exception | None = None
    ) -> None:
        size = chunk or max(len(data), 1)
        self.chunks = [data[i : i + size] for i in range(0, len(data), size)]
        self.hang = hang
        self.error = error
        self.hanging = asyncio.Event()
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.chunks:
            yield piece
        if self.error is not None:
            raise self.error
        if self.hang:
            self.hanging.set()
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


class Server:
    """Answers every request with one canned response and records the requests."""

    def __init__(
        self,
        data: bytes | str = b"",
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        content_type: str = "text/event-stream",
        **body: Any,
    ) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self.body = Body(raw, **body)
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


def provider(server: Server | httpx.MockTransport, **kwargs: Any) -> OpenAIProvider:
    transport = server.transport if isinstance(server, Server) else server
    kwargs.setdefault("api_key", KEY)
    return OpenAIProvider("http://llm.test/v1", transport=transport, **kwargs)


async def collect(
    p: OpenAIProvider, request: ModelRequest = REQUEST, signal: AbortSignal | None = None
) -> list[StreamEvent]:
    async with asyncio.timeout(5):
        return [e async for e in p.stream(request, signal or AbortSignal())]


async def failure(p: OpenAIProvider, request: ModelRequest = REQUEST) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await collect(p, request)
    return info.value


def sse(*payloads: object) -> str:
    return "".join(f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n" for p in payloads)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]}


# --- replies ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [0, 1, 7])
async def test_text_reply_with_usage_and_done(chunk_size: int) -> None:
    server = Server(fixture("openai_text.txt"), chunk=chunk_size)
    events = await collect(provider(server))
    assert events == [
        TextDelta("Hello"),
        TextDelta(", wörld"),
        UsageReport(Usage(input_tokens=12, output_tokens=5, cache_read_tokens=8)),
        StreamDone("stop", "chatcmpl-abc123"),
    ]
    assert server.body.closed


async def test_usage_is_priced_with_the_model() -> None:
    priced = MODEL.model_copy(update={"cost_input_per_mtok": 1.0, "cost_output_per_mtok": 2.0})
    events = await collect(
        provider(Server(fixture("openai_text.txt"))), REQUEST.model_copy(update={"model": priced})
    )
    [report] = [e for e in events if isinstance(e, UsageReport)]
    assert report.usage.cost_usd == pytest.approx((12 * 1.0 + 5 * 2.0) / 1e6)


async def test_reasoning_content_becomes_thinking() -> None:
    events = await collect(provider(Server(fixture("openai_reasoning.txt"))))
    assert events[:3] == [
        ThinkingDelta("The user"),
        ThinkingDelta(" greets me."),
        TextDelta("Hi there."),
    ]
    assert events[-1] == StreamDone("stop", "chatcmpl-llama1")


async def test_reasoning_field_is_thinking_and_never_duplicated() -> None:
    body = sse(
        chunk({"reasoning": "vllm style"}),
        chunk({"reasoning_content": "both", "reasoning": "both"}),
        chunk(finish="stop"),
        "[DONE]",
    )
    events = await collect(provider(Server(body)))
    assert events == [
        ThinkingDelta("vllm style"),
        ThinkingDelta("both"),
        StreamDone("stop", "chatcmpl-1"),
    ]


async def test_parallel_tool_calls() -> None:
    events = await collect(provider(Server(fixture("openai_tool_calls_parallel.txt"), chunk=5)))
    assert events == [
        ToolCallStart("call_aaa", "read_file"),
        ToolCallDelta("call_aaa", '{"pa'),
        ToolCallDelta("call_aaa", 'th": "a.txt"}'),
        ToolCallStart("call_bbb", "list_dir"),
        ToolCallDelta("call_bbb", '{"path": "."}'),
        ToolCallEnd("call_aaa"),
        ToolCallEnd("call_bbb"),
        UsageReport(Usage(input_tokens=50, output_tokens=30)),
        StreamDone("tool_use", "chatcmpl-tools1"),
    ]


async def test_tool_call_in_one_delta_with_repeated_id_and_no_done() -> None:
    events = await collect(provider(Server(fixture("openai_tool_call_single_delta.txt"))))
    assert events == [
        ToolCallStart("call_one", "get_weather"),
        ToolCallDelta("call_one", '{"city":"Paris"}'),
        ToolCallEnd("call_one"),
        StreamDone("tool_use", "chatcmpl-one"),
    ]


async def test_tool_call_without_id_or_index_gets_a_generated_id() -> None:
    body = sse(
        chunk({"tool_calls": [{"function": {"name": "a", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"id": "call_b", "function": {"name": "b", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
        chunk(finish="tool_calls"),
    )
    events = await collect(provider(Server(body)))
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [s.name for s in starts] == ["a", "b"]
    generated = starts[0].id
    assert generated.startswith("call_") and generated != "call_b"
    assert events[1:] == [
        ToolCallDelta(generated, "{}"),
        ToolCallStart("call_b", "b"),
        ToolCallDelta("call_b", "{"),
        ToolCallDelta("call_b", "}"),
        ToolCallEnd(generated),
        ToolCallEnd("call_b"),
        StreamDone("tool_use", "chatcmpl-1"),
    ]


async def test_new_id_at_a_used_index_starts_a_new_call() -> None:
    body = sse(
        chunk(
            {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "a", "arguments": "{}"}}]}
        ),
        chunk(
            {"tool_calls": [{"index": 0, "id": "c2", "function": {"name": "b", "arguments": "{}"}}]}
        ),
        chunk(finish="tool_calls"),
    )
    events = await collect(provider(Server(body)))
    assert events == [
        ToolCallStart("c1", "a"),
        ToolCallDelta("c1", "{}"),
        ToolCallEnd("c1"),
        ToolCallStart("c2", "b"),
        ToolCallDelta("c2", "{}"),
        ToolCallEnd("c2"),
        StreamDone("tool_use", "chatcmpl-1"),
    ]


async def test_object_arguments_are_json_encoded() -> None:
    body = sse(
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c", "function": {"name": "f", "arguments": {"x": 1}}}
                ]
            }
        ),
        chunk(finish="tool_calls"),
    )
    events = await collect(provider(Server(body)))
    assert ToolCallDelta("c", '{"x": 1}') in events


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_use"),
        ("function_call", "tool_use"),
        ("eos", "stop"),
    ],
)
async def test_finish_reasons(finish: str, stop: str) -> None:
    events = await collect(
        provider(Server(sse(chunk({"content": "x"}), chunk(finish=finish), "[DONE]")))
    )
    assert events[-1] == StreamDone(stop, "chatcmpl-1")  # type: ignore[arg-type]


async def test_stop_with_tool_calls_is_tool_use() -> None:
    call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}
    body = sse(chunk({"tool_calls": [call]}), chunk(finish="stop"), "[DONE]")
    events = await collect(provider(Server(body)))
    assert events[-1] == StreamDone("tool_use", "chatcmpl-1")


async def test_content_filter_is_a_non_retryable_error() -> None:
    error = await failure(
        provider(Server(sse(chunk({"content": "x"}), chunk(finish="content_filter"))))
    )
    assert "content filter" in error.message
    assert not error.retryable


async def test_done_without_finish_reason_is_stop() -> None:
    events = await collect(provider(Server(sse(chunk({"content": "x"}), "[DONE]"))))
    assert events == [TextDelta("x"), StreamDone("stop", "chatcmpl-1")]


async def test_events_after_done_are_not_read() -> None:
    server = Server(sse(chunk({"content": "x"}), "[DONE]"), hang=True)
    events = await collect(provider(server))
    assert events[-1] == StreamDone("stop", "chatcmpl-1")
    assert server.body.closed


# --- request -----------------------------------------------------------------------------

IMAGE = ImageContent(data="aGk=", mime_type="image/png")


async def test_request_body_shape() -> None:
    transcript = (
        UserMessage(content=(TextContent(text="look"), IMAGE)),
        AssistantMessage(
            content=(
                ThinkingContent(thinking="hmm", signature="sig"),
                TextContent(text="Reading."),
                ToolCall(id="c1", name="read", arguments={"path": "a"}),
                ToolCall(id="c2", name="shot", arguments={}),
            )
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="read", content=(TextContent(text="A"),)),
        ToolResultMessage(tool_call_id="c2", tool_name="shot", content=(IMAGE,), is_error=False),
        AssistantMessage(content=(ThinkingContent(thinking="only thinking"),)),
        UserMessage(content="thanks"),
    )
    tool = ToolSpec(name="read", description="Read a file", parameters={"type": "object"})
    request = ModelRequest(
        model=MODEL, system_prompt="Be brief.", messages=transcript, tools=(tool,)
    )
    server = Server(fixture("openai_text.txt"))
    await collect(provider(server, headers={"X-Trace": "1"}), request)
    sent = server.sent
    assert server.requests[-1].url == "http://llm.test/v1/chat/completions"
    assert sent["model"] == "gpt-x"
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["max_tokens"] == 1000
    assert "max_completion_tokens" not in sent
    assert "reasoning_effort" not in sent
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object"},
            },
        }
    ]
    image_part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}}
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "look"}, image_part]},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "a"}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": "(image attached below)"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Image(s) from tool result c2 (shot):"},
                image_part,
            ],
        },
        {"role": "user", "content": "thanks"},
    ]
    headers = server.requests[-1].headers
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["accept"] == "text/event-stream"
    assert headers["x-trace"] == "1"


async def test_assistant_with_only_tool_calls_has_null_content() -> None:
    transcript = (
        UserMessage(content="go"),
        AssistantMessage(content=(ToolCall(id="c", name="f"),)),
        ToolResultMessage(tool_call_id="c", tool_name="f"),
    )
    server = Server(fixture("openai_text.txt"))
    await collect(provider(server), ModelRequest(model=MODEL, messages=transcript))
    assert server.sent["messages"][1]["content"] is None
    assert server.sent["messages"][2] == {"role": "tool", "tool_call_id": "c", "content": ""}


async def test_options_are_merged_and_none_removes_a_key() -> None:
    server = Server(fixture("openai_text.txt"))
    options = {"temperature": 0.2, "tool_choice": "auto", "stream_options": None}
    await collect(provider(server, options=options))
    sent = server.sent
    assert sent["temperature"] == 0.2
    assert sent["tool_choice"] == "auto"
    assert "stream_options" not in sent


async def test_max_tokens_field_is_configurable_and_overridable() -> None:
    server = Server(fixture("openai_text.txt"))
    await collect(provider(server, max_tokens_field="max_completion_tokens"))
    assert server.sent["max_completion_tokens"] == 1000
    assert "max_tokens" not in server.sent
    other = Server(fixture("openai_text.txt"))
    await collect(provider(other, options={"max_completion_tokens": 50}))
    assert other.sent["max_completion_tokens"] == 50
    assert "max_tokens" not in other.sent


async def test_reasoning_effort_for_reasoning_models_only() -> None:
    server = Server(fixture("openai_text.txt"))
    thinker = MODEL.model_copy(update={"reasoning": True})
    await collect(provider(server), ModelRequest(model=thinker, thinking_level="high"))
    assert server.sent["reasoning_effort"] == "high"
    plain = Server(fixture("openai_text.txt"))
    await collect(provider(plain), ModelRequest(model=MODEL, thinking_level="high"))
    assert "reasoning_effort" not in plain.sent


async def test_environment_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.test/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-123")
    server = Server(fixture("openai_text.txt"))
    p = OpenAIProvider(transport=server.transport)
    await collect(p)
    assert server.requests[-1].url == "http://env.test/v1/chat/completions"
    assert server.requests[-1].headers["authorization"] == "Bearer sk-env-key-123"
    assert p.name == "openai" and p.models == {}


async def test_no_key_sends_no_authorization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = Server(fixture("openai_text.txt"))
    await collect(provider(server, api_key=None))
    assert "authorization" not in server.requests[-1].headers


def test_defaults_to_the_official_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    p = OpenAIProvider(api_key=KEY, name="oa", models=[MODEL])
    assert p.base_url == "https://api.openai.com/v1"
    assert p.max_tokens_field == "max_completion_tokens"
    assert p.name == "oa" and p.models == {"gpt-x": MODEL}


def test_repr_redacts_the_key() -> None:
    p = provider(Server(), headers={"Authorization": "Bearer other-secret"})
    assert KEY not in repr(p) and "other-secret" not in repr(p)
    assert "***" in repr(p)


async def test_unknown_message_role_is_a_provider_error() -> None:
    request = ModelRequest(model=MODEL, messages=(TextContent(text="not a message"),))
    error = await failure(provider(Server(fixture("openai_text.txt"))), request)
    assert "cannot send" in error.message


# --- malformed streams -------------------------------------------------------------------


async def test_stream_cut_mid_event_is_retryable() -> None:
    body = sse(chunk({"content": "x"})) + 'data: {"id":"chatcmpl-1","choices":[{"del'
    error = await failure(provider(Server(body)))
    assert "stream ended before completion" in error.message
    assert error.retryable


async def test_invalid_json_is_a_clear_error() -> None:
    error = await failure(provider(Server(sse(chunk({"content": "x"}), "{not json}"))))
    assert "invalid JSON" in error.message
    assert not error.retryable


async def test_non_object_payload_is_an_error() -> None:
    error = await failure(provider(Server(sse("[1, 2]"))))
    assert "unexpected stream payload" in error.message


@pytest.mark.parametrize("body", ["", ": only a comment\n\n", sse(chunk({"content": "x"}))])
async def test_stream_without_finish_or_done_is_retryable(body: str) -> None:
    error = await failure(provider(Server(body)))
    assert error.message == "openai: stream ended before completion"
    assert error.retryable


@pytest.mark.parametrize(
    ("body", "chunks"),
    [
        (sse("[DONE]"), 0),
        (": keep-alive\n\n" + sse("[DONE]"), 0),
        (
            sse(
                {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 3}},
                "[DONE]",
            ),
            1,
        ),
        (sse('{"id": "chatcmpl-1", "choices": []}', "[DONE]"), 1),
    ],
    ids=["done-only", "comment-done", "usage-done", "empty-choices-done"],
)
async def test_stream_without_any_choice_is_an_error(body: str, chunks: int) -> None:
    error = await failure(provider(Server(body)))
    assert (
        error.message
        == f"openai: the stream ended without a reply (no choices in {chunks} chunk(s))"
    )
    assert not error.retryable


async def test_chunks_without_choices_before_the_reply_are_skipped() -> None:
    body = sse(
        {"id": "chatcmpl-1", "choices": [], "prompt_filter_results": []},
        chunk({"content": "x"}),
        "[DONE]",
    )
    events = await collect(provider(Server(body)))
    assert events == [TextDelta("x"), StreamDone("stop", "chatcmpl-1")]


async def test_error_object_in_stream_maps_context_overflow() -> None:
    error = await failure(provider(Server(fixture("openai_error_in_stream.txt"))))
    assert error.context_overflow
    assert not error.retryable
    assert error.status_code == 400
    assert "exceeds the available context size" in error.message


async def test_server_error_object_in_stream_is_retryable() -> None:
    body = sse(
        chunk({"content": "x"}), {"error": {"code": 500, "message": "boom", "type": "server_error"}}
    )
    error = await failure(provider(Server(body)))
    assert error.retryable and error.status_code == 500 and not error.context_overflow


async def test_error_event_type_in_stream() -> None:
    body = 'event: error\ndata: {"message": "rate limited", "type": "rate_limit_error"}\n\n'
    error = await failure(provider(Server(body)))
    assert error.retryable and "rate limited" in error.message


# --- HTTP errors -------------------------------------------------------------------------


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> str:
    return json.dumps({"error": {"message": message, "type": kind, "code": code, "param": None}})


async def test_http_500_is_retryable_with_the_server_message() -> None:
    server = Server(
        error_body("The server had an error", "server_error"),
        status=500,
        content_type="application/json",
    )
    error = await failure(provider(server))
    assert error.retryable and error.status_code == 500
    assert "The server had an error" in error.message
    assert server.body.closed


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retryable(status: int) -> None:
    error = await failure(
        provider(Server(error_body("nope"), status=status, content_type="application/json"))
    )
    assert not error.retryable and error.status_code == status
    assert f"HTTP {status}" in error.message and "nope" in error.message


@pytest.mark.parametrize("status", [408, 409, 425, 429, 502, 503, 504, 529])
async def test_transient_statuses_are_retryable(status: int) -> None:
    error = await failure(
        provider(Server("upstream trouble", status=status, content_type="text/plain"))
    )
    assert error.retryable and error.status_code == status
    assert "upstream trouble" in error.message


async def test_401_never_shows_the_key() -> None:
    body = error_body(f"Incorrect API key provided: {KEY}", code="invalid_api_key")
    error = await failure(provider(Server(body, status=401, content_type="application/json")))
    assert KEY not in error.message and KEY not in repr(error)
    assert "***" in error.message


async def test_empty_error_body_uses_the_reason_phrase() -> None:
    error = await failure(provider(Server("", status=503)))
    assert "Service Unavailable" in error.message


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
async def test_429_retry_after(headers: dict[str, str], expected: float | None) -> None:
    server = Server(
        error_body("slow down", "requests", "rate_limit_exceeded"),
        status=429,
        headers=headers,
        content_type="application/json",
    )
    error = await failure(provider(server))
    assert error.retryable and error.retry_after == expected


async def test_429_retry_after_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    error = await failure(provider(Server("", status=429, headers={"retry-after": when})))
    assert error.retry_after is not None and 25 <= error.retry_after <= 30


async def test_exhausted_quota_is_not_retryable() -> None:
    body = error_body("You exceeded your current quota", "insufficient_quota", "insufficient_quota")
    error = await failure(provider(Server(body, status=429, content_type="application/json")))
    assert not error.retryable


@pytest.mark.parametrize(
    "body",
    [
        error_body(
            "This model's maximum context length is 8192 tokens.", code="context_length_exceeded"
        ),
        json.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                }
            }
        ),
        json.dumps({"error": "prompt is too long"}),
        "Input tokens exceed context window",
    ],
)
async def test_context_length_errors(body: str) -> None:
    error = await failure(provider(Server(body, status=400, content_type="application/json")))
    assert error.context_overflow and not error.retryable


async def test_json_error_with_status_200_is_mapped() -> None:
    server = Server(
        error_body("bad model", code="model_not_found"), content_type="application/json"
    )
    error = await failure(provider(server))
    assert "bad model" in error.message and not error.retryable


async def test_json_success_instead_of_a_stream_is_an_error() -> None:
    error = await failure(provider(Server('{"choices": []}', content_type="application/json")))
    assert "expected an event stream" in error.message


# --- transport, timeouts, abort, cancellation --------------------------------------------


def failing(exc: Exception) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        raise exc

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(
    ("exc", "label", "retryable"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), "connection failed", True),
        (httpx.ConnectTimeout("timed out"), "connect timeout", True),
        (httpx.ReadTimeout("timed out"), "read timeout", True),
        (httpx.RemoteProtocolError("peer closed"), "connection broken", True),
        (httpx.UnsupportedProtocol("ftp"), "transport error", False),
    ],
)
async def test_transport_errors_are_wrapped(exc: Exception, label: str, retryable: bool) -> None:
    error = await failure(provider(failing(exc)))
    assert label in error.message and error.retryable is retryable


async def test_connection_dropped_mid_stream_is_retryable_and_closed() -> None:
    server = Server(
        sse(chunk({"content": "x"})), error=httpx.RemoteProtocolError("incomplete chunked read")
    )
    p = provider(server)
    events: list[StreamEvent] = []
    with pytest.raises(ProviderError) as info:
        async with asyncio.timeout(5):
            async for event in p.stream(REQUEST, AbortSignal()):
                events.append(event)
    assert events == [TextDelta("x")]
    assert info.value.retryable and "connection broken" in info.value.message
    assert server.body.closed


async def test_server_that_stops_sending_hits_the_read_timeout() -> None:
    server = Server(sse(chunk({"content": "x"})), hang=True)
    p = provider(server, timeout={"read": 0.05})
    error = await failure(p)
    assert error.retryable and "read timeout" in error.message
    assert server.body.closed


async def test_abort_between_events_stops_and_closes() -> None:
    server = Server(fixture("openai_text.txt"), chunk=3)
    signal = AbortSignal()
    events: list[StreamEvent] = []
    async with asyncio.timeout(5):
        async for event in provider(server).stream(REQUEST, signal):
            events.append(event)
            signal.set()
    assert events == [TextDelta("Hello")]
    assert server.body.closed


async def run_until_hanging(server: Server) -> tuple[asyncio.Task[list[StreamEvent]], AbortSignal]:
    signal = AbortSignal()
    task = asyncio.create_task(collect(provider(server), signal=signal))
    async with asyncio.timeout(5):
        await server.body.hanging.wait()
    return task, signal


async def test_abort_while_the_server_is_silent_ends_the_stream_promptly() -> None:
    server = Server(sse(chunk({"content": "x"})), hang=True)
    task, signal = await run_until_hanging(server)
    signal.set("user")
    async with asyncio.timeout(1):
        events = await task
    assert events == [TextDelta("x")]
    assert server.body.closed
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_cancelling_the_consumer_closes_the_response_and_leaves_no_task() -> None:
    server = Server(sse(chunk({"content": "x"})), hang=True)
    task, _ = await run_until_hanging(server)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert server.body.closed
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_closing_the_generator_early_closes_the_response() -> None:
    server = Server(sse(chunk({"content": "a"}), chunk({"content": "b"})), hang=True)
    stream = cast(
        AsyncGenerator[StreamEvent, None], provider(server).stream(REQUEST, AbortSignal())
    )
    async with aclosing(stream):
        async for _ in stream:
            break
    assert server.body.closed
    assert asyncio.all_tasks() == {asyncio.current_task()}


def silent_server() -> tuple[httpx.MockTransport, asyncio.Event]:
    """A server that accepts the request and never answers it."""
    reached = asyncio.Event()

    async def handle(request: httpx.Request) -> httpx.Response:
        reached.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return httpx.MockTransport(handle), reached


async def test_no_response_headers_hits_the_timeout() -> None:
    transport, _ = silent_server()
    p = provider(transport, timeout={"connect": 0.01, "write": 0.01, "read": 0.05})
    error = await failure(p)
    assert error.retryable and "read timeout" in error.message


async def test_abort_before_response_headers_is_prompt() -> None:
    transport, reached = silent_server()
    signal = AbortSignal()
    task = asyncio.create_task(collect(provider(transport), signal=signal))
    async with asyncio.timeout(5):
        await reached.wait()
    signal.set()
    async with asyncio.timeout(1):
        assert await task == []
    assert asyncio.all_tasks() == {asyncio.current_task()}


def test_timeout_configuration() -> None:
    assert provider(Server(), timeout=3).timeout == httpx.Timeout(3.0)
    partial = provider(Server(), timeout={"read": 1.0}).timeout
    assert (partial.read, partial.connect) == (1.0, DEFAULT_TIMEOUT.connect)
    with pytest.raises(ValueError, match="unknown timeout phase"):
        provider(Server(), timeout={"total": 1.0})


async def test_already_aborted_signal_sends_nothing() -> None:
    server = Server(fixture("openai_text.txt"))
    signal = AbortSignal()
    signal.set()
    assert await collect(provider(server), signal=signal) == []
    assert server.requests == []


# --- recorded local transcripts (llama.cpp) ----------------------------------------------

LOCAL = sorted(FIXTURES.glob("local_openai_*.txt"))
Check = Callable[[list[StreamEvent]], None]


def check_tool_calls_close(events: list[StreamEvent]) -> None:
    started = [e.id for e in events if isinstance(e, ToolCallStart)]
    ended = [e.id for e in events if isinstance(e, ToolCallEnd)]
    assert sorted(started) == sorted(ended)
    for call_id in started:
        args = "".join(
            e.arguments_json_fragment
            for e in events
            if isinstance(e, ToolCallDelta) and e.id == call_id
        )
        json.loads(args)


@pytest.mark.parametrize("path", LOCAL, ids=[p.stem for p in LOCAL])
async def test_recorded_local_transcripts_replay(path: Path) -> None:
    p = provider(Server(fixture(path), chunk=11))
    if "error" in path.stem:
        error = await failure(p)
        assert error.message.startswith("openai: ")
        return
    events = await collect(p)
    assert isinstance(events[-1], StreamDone)
    assert sum(isinstance(e, StreamDone) for e in events) == 1
    check_tool_calls_close(events)
    if "tool" in path.stem:
        assert events[-1].stop_reason == "tool_use"
    else:
        assert "".join(e.text for e in events if isinstance(e, TextDelta))
