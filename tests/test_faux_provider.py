"""FauxProvider driven directly: what it streams for each kind of scripted step."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from mainspring import (
    AbortSignal,
    AssistantMessage,
    Model,
    ModelRequest,
    Provider,
    ProviderError,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from mainspring.providers import (
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from mainspring.testing import FauxProvider, faux

MODEL = Model(provider="faux", id="scripted")


def request(*messages: Any) -> ModelRequest:
    return ModelRequest(model=MODEL, messages=messages or (UserMessage(content="hi"),))


async def collect(
    provider: FauxProvider, req: ModelRequest | None = None, signal: AbortSignal | None = None
) -> list[StreamEvent]:
    return [event async for event in provider.stream(req or request(), signal or AbortSignal())]


def arguments(events: list[StreamEvent], call_id: str) -> str:
    return "".join(
        e.arguments_json_fragment
        for e in events
        if isinstance(e, ToolCallDelta) and e.id == call_id
    )


def done(events: list[StreamEvent]) -> StreamDone:
    assert isinstance(events[-1], StreamDone)
    return events[-1]


# ------------------------------------------------------------------ replies


async def test_text_is_chunked_then_usage_then_done() -> None:
    provider = FauxProvider([faux.text("hello world")])
    events = await collect(provider)
    assert events[:3] == [TextDelta("hell"), TextDelta("o wo"), TextDelta("rld")]
    assert isinstance(events[3], UsageReport)
    assert done(events) == StreamDone("stop", None)
    assert len(events) == 5


async def test_chunk_size_is_configurable_and_empty_text_yields_one_delta() -> None:
    provider = FauxProvider([faux.text("abcdef"), faux.text("")], chunk_size=5)
    assert [e for e in await collect(provider) if isinstance(e, TextDelta)] == [
        TextDelta("abcde"),
        TextDelta("f"),
    ]
    assert [e for e in await collect(provider) if isinstance(e, TextDelta)] == [TextDelta("")]


async def test_thinking_chunks_carry_the_signature_on_the_last_delta() -> None:
    provider = FauxProvider([faux.thinking("pondering", signature="sig")])
    deltas = [e for e in await collect(provider) if isinstance(e, ThinkingDelta)]
    assert deltas == [
        ThinkingDelta("pond"),
        ThinkingDelta("erin"),
        ThinkingDelta("g", "sig"),
    ]


async def test_tool_call_fragments_reassemble_to_the_json() -> None:
    args = {"path": "src/some/long/file.py", "lines": [1, 2, 3], "note": "ünïcode"}
    provider = FauxProvider([faux.tool_call("read", args)])
    events = await collect(provider)
    assert events[0] == ToolCallStart("call_1", "read")
    fragments = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(fragments) > 1
    assert all(len(f.arguments_json_fragment) <= 4 for f in fragments)
    assert json.loads(arguments(events, "call_1")) == args
    end_index = events.index(ToolCallEnd("call_1"))
    assert all(isinstance(e, ToolCallDelta) for e in events[1:end_index])
    assert done(events).stop_reason == "tool_use"


async def test_tool_call_ids_are_deterministic_and_explicit_ids_kept() -> None:
    script: list[Any] = [
        [faux.tool_call("a", {}), faux.tool_call("b", {}, id="mine")],
        faux.tool_call("c", {}),
    ]
    first, second = FauxProvider(script), FauxProvider(script)
    for provider in (first, second):
        one = await collect(provider)
        two = await collect(provider)
        starts = [e for e in one + two if isinstance(e, ToolCallStart)]
        assert starts == [
            ToolCallStart("call_1", "a"),
            ToolCallStart("mine", "b"),
            ToolCallStart("call_2", "c"),
        ]
        assert arguments(one, "call_1") == "{}"


async def test_string_args_are_sent_verbatim_even_if_malformed() -> None:
    provider = FauxProvider([faux.tool_call("read", '{"path": "a.tx', id="t1")])
    events = await collect(provider)
    assert arguments(events, "t1") == '{"path": "a.tx'


async def test_empty_string_args_send_no_fragments() -> None:
    events = await collect(FauxProvider([faux.tool_call("ping", "", id="p")]))
    assert [type(e) for e in events] == [ToolCallStart, ToolCallEnd, UsageReport, StreamDone]


async def test_reply_streams_blocks_in_order_with_forced_fields() -> None:
    usage = Usage(input_tokens=7, output_tokens=9)
    provider = FauxProvider(
        [
            faux.reply(
                faux.thinking("hm"),
                faux.text("ok"),
                faux.tool_call("x", {"a": 1}, id="c"),
                stop_reason="length",
                usage=usage,
                response_id="resp-1",
            )
        ]
    )
    events = await collect(provider)
    assert events[:3] == [ThinkingDelta("hm"), TextDelta("ok"), ToolCallStart("c", "x")]
    assert UsageReport(usage) in events
    assert done(events) == StreamDone("length", "resp-1")


async def test_plain_blocks_lists_and_strings_are_steps() -> None:
    provider = FauxProvider(
        [
            "bare string",
            [faux.text("a"), "b"],
            (TextContent(text="c"), ThinkingContent(thinking="d"), ToolCall(id="i", name="n")),
        ]
    )
    texts = [e.text for e in await collect(provider) if isinstance(e, TextDelta)]
    assert "".join(texts) == "bare string"
    assert [e for e in await collect(provider) if isinstance(e, TextDelta)] == [
        TextDelta("a"),
        TextDelta("b"),
    ]
    third = await collect(provider)
    assert third[:3] == [TextDelta("c"), ThinkingDelta("d"), ToolCallStart("i", "n")]
    assert done(third).stop_reason == "tool_use"


async def test_an_assistant_message_is_replayed() -> None:
    message = AssistantMessage(
        content=(TextContent(text="hi"), ToolCall(id="k", name="t", arguments={"q": 1})),
        stop_reason="tool_use",
        usage=Usage(input_tokens=3, output_tokens=4),
        response_id="r9",
    )
    events = await collect(FauxProvider([message]))
    assert json.loads(arguments(events, "k")) == {"q": 1}
    assert UsageReport(message.usage) in events
    assert done(events) == StreamDone("tool_use", "r9")


async def test_usage_estimates_a_quarter_of_the_characters() -> None:
    history = (
        UserMessage(content="x" * 40),
        AssistantMessage(
            content=(TextContent(text="y" * 10), ToolCall(id="c", name="tool", arguments={})),
            stop_reason="tool_use",
        ),
        ToolResultMessage(tool_call_id="c", tool_name="tool", content=(TextContent(text="z"),)),
    )
    provider = FauxProvider([faux.reply(faux.text("a" * 10), faux.tool_call("ab", {"k": 1}))])
    events = await collect(provider, request(*history))
    usage = next(e.usage for e in events if isinstance(e, UsageReport))
    # input: 40 + 10 + len("tool") + len("{}") + 1 = 57 chars; output: 10 + 2 + 8 = 20 chars
    assert usage.input_tokens == 15
    assert usage.output_tokens == 5


async def test_usage_is_at_least_one_and_priced_with_the_model() -> None:
    model = Model(provider="faux", id="paid", cost_input_per_mtok=1e6, cost_output_per_mtok=2e6)
    provider = FauxProvider([faux.reply()])
    events = await collect(provider, ModelRequest(model=model))
    assert [type(e) for e in events] == [UsageReport, StreamDone]
    usage = events[0].usage  # type: ignore[union-attr]
    assert (usage.input_tokens, usage.output_tokens) == (1, 1)
    assert usage.cost_usd == pytest.approx(3.0)


def test_reply_infers_and_validates_stop_reasons() -> None:
    assert faux.reply(faux.text("a")).stop_reason == "stop"
    assert faux.reply(faux.text("a"), faux.tool_call("t", {})).stop_reason == "tool_use"
    assert faux.reply(faux.text("a"), stop_reason="length").stop_reason == "length"
    with pytest.raises(ValueError, match="stop_reason"):
        faux.reply(stop_reason="finished")  # type: ignore[arg-type]


# ------------------------------------------------------------------ failures


async def test_error_before_any_output() -> None:
    provider = FauxProvider(
        [faux.error("overloaded", retryable=True, status_code=529, retry_after=2.5)]
    )
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(request(), AbortSignal()):
            seen.append(event)
    assert seen == []
    error = caught.value
    assert (error.message, error.retryable, error.status_code, error.retry_after) == (
        "overloaded",
        True,
        529,
        2.5,
    )
    assert error.context_overflow is False


async def test_error_after_partial_output() -> None:
    provider = FauxProvider(
        [
            faux.error(
                "prompt too long",
                context_overflow=True,
                after=[faux.text("partial"), faux.tool_call("t", {"a": 1}, id="c")],
            )
        ]
    )
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(request(), AbortSignal()):
            seen.append(event)
    assert caught.value.context_overflow is True
    assert seen[:2] == [TextDelta("part"), TextDelta("ial")]
    assert seen[-1] == ToolCallEnd("c")
    assert not any(isinstance(e, StreamDone | UsageReport) for e in seen)


async def test_raises_any_exception_instance_or_class() -> None:
    provider = FauxProvider(
        [faux.raises(RuntimeError("boom"), after=["x"]), faux.raises(KeyError), ValueError("v")]
    )
    seen: list[StreamEvent] = []
    with pytest.raises(RuntimeError, match="boom"):
        async for event in provider.stream(request(), AbortSignal()):
            seen.append(event)
    assert seen == [TextDelta("x")]
    with pytest.raises(KeyError):
        await collect(provider)
    with pytest.raises(ValueError, match="v"):
        await collect(provider)


async def test_cut_ends_without_usage_or_done() -> None:
    events = await collect(FauxProvider([faux.cut(faux.text("half a rep"))]))
    assert events == [TextDelta("half"), TextDelta(" a r"), TextDelta("ep")]
    assert await collect(FauxProvider([faux.cut()])) == []


async def test_exhausted_script_raises_a_non_retryable_error() -> None:
    provider = FauxProvider([faux.text("one"), faux.text("two")])
    await collect(provider)
    await collect(provider)
    with pytest.raises(ProviderError, match="faux script exhausted") as caught:
        await collect(provider)
    assert "2 requests scripted" in caught.value.message
    assert caught.value.retryable is False
    assert len(provider.requests) == 3


# ------------------------------------------------------------------ callables


async def test_sync_and_async_callables_compute_the_reply_from_the_request() -> None:
    def count(req: ModelRequest) -> Any:
        return faux.text(f"{len(req.messages)} messages")

    async def echo(req: ModelRequest) -> Any:
        await asyncio.sleep(0)
        return [faux.text(req.messages[-1].content), faux.tool_call("t", {"n": 1})]

    provider = FauxProvider([count, echo], chunk_size=100)
    first = await collect(provider, request(UserMessage(content="a"), UserMessage(content="b")))
    assert first[0] == TextDelta("2 messages")
    second = await collect(provider, request(UserMessage(content="shout")))
    assert second[0] == TextDelta("shout")
    assert done(second).stop_reason == "tool_use"


async def test_a_callable_may_return_an_error_step() -> None:
    provider = FauxProvider([lambda req: faux.error("nope")])
    with pytest.raises(ProviderError, match="nope"):
        await collect(provider)


async def test_a_callable_returning_a_non_step_is_a_type_error() -> None:
    steps: list[Any] = [lambda req: 42, lambda req: lambda r: "x"]
    provider = FauxProvider(steps)
    with pytest.raises(TypeError, match="faux step"):
        await collect(provider)
    with pytest.raises(TypeError, match="not another function"):
        await collect(provider)


def test_static_steps_are_validated_when_scripted() -> None:
    with pytest.raises(TypeError, match="faux step"):
        FauxProvider([42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="reply block"):
        FauxProvider([[faux.text("a"), 3]])
    with pytest.raises(TypeError, match="reply block"):
        faux.reply(UserMessage(content="not a block"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        faux.tool_call("t", 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        faux.tool_call("t", {"x": object()})
    with pytest.raises(TypeError, match="sequence of steps"):
        FauxProvider("just a string")
    with pytest.raises(TypeError, match="sequence of steps"):
        FauxProvider(faux.text("one step, not a list"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence of steps"):
        FauxProvider(AssistantMessage())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunk_size"):
        FauxProvider(chunk_size=0)
    with pytest.raises(ValueError, match="delay_s"):
        FauxProvider(delay_s=-1)


# ------------------------------------------------------------------ abort and pacing


async def test_abort_mid_stream_with_delay_stops_without_done() -> None:
    provider = FauxProvider([faux.text("a" * 40)], chunk_size=1, delay_s=0.01)
    signal = AbortSignal()
    seen: list[StreamEvent] = []
    async for event in provider.stream(request(), signal):
        seen.append(event)
        if len(seen) == 3:
            signal.set()
    assert seen == [TextDelta("a")] * 3


async def test_abort_wakes_a_long_pause_at_once() -> None:
    provider = FauxProvider([faux.text("ab")], chunk_size=1, delay_s=30.0)
    signal = AbortSignal()
    seen: list[StreamEvent] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(request(), signal):
            seen.append(event)
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    started = time.monotonic()
    signal.set()
    await asyncio.wait_for(task, timeout=5)
    assert time.monotonic() - started < 1.0
    assert seen == [TextDelta("a")]


async def test_abort_before_streaming_yields_nothing_and_failures_do_not_raise() -> None:
    signal = AbortSignal()
    signal.set()
    provider = FauxProvider([faux.text("hello"), faux.error("late", after=["x"])])
    assert await collect(provider, signal=signal) == []
    assert await collect(provider, signal=signal) == []
    assert provider.remaining == 0
    assert len(provider.requests) == 2


async def test_delay_paces_the_stream() -> None:
    provider = FauxProvider([faux.text("abc")], chunk_size=1, delay_s=0.02)
    started = time.monotonic()
    events = await collect(provider)
    assert len(events) == 5  # three deltas, usage, done: four pauses
    assert time.monotonic() - started >= 0.06


# ------------------------------------------------------------------ bookkeeping


async def test_requests_are_recorded_in_order_and_script_can_grow() -> None:
    provider = FauxProvider([faux.text("one")])
    assert provider.remaining == 1
    first, second, third = request(UserMessage(content="1")), request(), request()
    await collect(provider, first)
    provider.append(faux.text("two"), faux.text("three"))
    provider.extend([faux.text("four")])
    assert provider.remaining == 3
    await collect(provider, second)
    await collect(provider, third)
    assert provider.requests == [first, second, third]
    assert provider.requests[0] is first
    assert provider.remaining == 1


async def test_signal_is_optional_and_provider_fits_the_protocol() -> None:
    catalogue = {"big": Model(provider="mock", id="big", context_window=1_000_000)}
    provider = FauxProvider([faux.text("x")], name="mock", models=catalogue)
    assert isinstance(provider, Provider)
    assert provider.name == "mock"
    assert provider.models == catalogue
    assert FauxProvider().models == {}
    events = [event async for event in provider.stream(request())]
    assert done(events).stop_reason == "stop"
    assert "remaining=0" in repr(provider)
