"""The built-in ``otel`` plugin: span trees, attributes, events, context and logs.

Runs are traced into the SDK's in-memory exporter through ``settings.otel.tracer_provider``
(never the process-wide provider); every run is grammar-checked by ``scripted_run``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from mainspring import AssistantMessage, Block, Settings, TextContent, UserMessage, hookimpl, tool
from mainspring.logs import get_logger
from mainspring.plugins import otel
from mainspring.settings import OtelSettings, RetrySettings
from mainspring.testing import faux, scripted_run

log = get_logger("mainspring.tests.otel")


class Traced:
    """An SDK tracer provider writing to an in-memory exporter."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def settings(self, **otel_options: Any) -> Settings:
        options: dict[str, Any] = {"enabled": True, "tracer_provider": self.provider}
        options.update(otel_options)
        return Settings(otel=OtelSettings(**options), retry=RetrySettings(base_delay_s=0))

    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name.startswith(prefix)]

    def root(self) -> ReadableSpan:
        [root] = self.named("invoke_agent")
        return root


@pytest.fixture
def traced() -> Traced:
    return Traced()


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    log.warning("inside_echo")
    return text


@tool
def login(user: str, api_key: str) -> str:
    """Say who logged in."""
    return f"{user} logged in"


def children_of(parent: ReadableSpan, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    parent_id = parent.context.span_id
    return [span for span in spans if span.parent is not None and span.parent.span_id == parent_id]


def everything_recorded(spans: Sequence[ReadableSpan]) -> str:
    """Every attribute value and event attribute of ``spans`` and their statuses, as text."""
    pieces: list[str] = []
    for span in spans:
        pieces += [span.name, str(span.status.description)]
        pieces += [str(value) for value in (span.attributes or {}).values()]
        for event in span.events:
            pieces += [event.name, *(str(v) for v in (event.attributes or {}).values())]
    return "\n".join(pieces)


# -- the shape of the tree ----------------------------------------------------------------


async def test_a_run_is_one_invoke_agent_span_with_chat_and_tool_children(traced: Traced) -> None:
    run = await scripted_run(
        [faux.tool_call("echo", {"text": "hi"}, id="c1"), faux.text("done")],
        tools=[echo],
        settings=traced.settings(),
    )
    root = traced.root()
    assert root.parent is None
    assert root.kind is trace.SpanKind.INTERNAL
    children = children_of(root, traced.spans)
    assert [span.name for span in sorted(children, key=lambda s: s.start_time or 0)] == [
        "chat test",
        "execute_tool echo",
        "chat test",
    ]
    assert len(traced.spans) == 4
    assert {span.context.trace_id for span in traced.spans} == {root.context.trace_id}
    assert all(root.start_time <= s.start_time and s.end_time <= root.end_time for s in children)  # type: ignore[operator]
    assert root.attributes is not None
    assert root.attributes["mainspring.run_id"] == run.recorder.events[0].run_id
    assert root.attributes["mainspring.end_reason"] == "stop"
    assert root.attributes["mainspring.turns"] == 2
    assert root.status.status_code is StatusCode.UNSET
    assert otel.traced_runs() == 0


async def test_parallel_tool_calls_give_overlapping_sibling_spans(traced: Traced) -> None:
    both_running = asyncio.Event()
    arrived: list[str] = []

    @tool
    async def meet(name: str) -> str:
        """Wait until both calls are running."""
        arrived.append(name)
        if len(arrived) == 2:
            both_running.set()
        await both_running.wait()
        return name

    await scripted_run(
        [
            [faux.tool_call("meet", {"name": "a"}, id="a"), faux.tool_call("meet", {"name": "b"})],
            faux.text("done"),
        ],
        tools=[meet],
        settings=traced.settings(),
    )
    first, second = traced.named("execute_tool meet")
    assert first.start_time < second.end_time and second.start_time < first.end_time  # type: ignore[operator]
    root = traced.root()
    assert first.parent is not None and second.parent is not None
    assert first.parent.span_id == second.parent.span_id == root.context.span_id
    assert {s.attributes["gen_ai.tool.call.id"] for s in (first, second)} == {"a", "call_1"}  # type: ignore[index]


async def test_each_attempt_of_a_retried_request_is_a_chat_span(traced: Traced) -> None:
    await scripted_run(
        [
            faux.error("overloaded", retryable=True, status_code=529),
            faux.error("overloaded again", retryable=True, after=[faux.text("partial")]),
            faux.text("done"),
        ],
        settings=traced.settings(),
    )
    chats = sorted(traced.named("chat"), key=lambda s: s.start_time or 0)
    assert [s.attributes.get("mainspring.request.attempt") for s in chats] == [None, 1, 2]  # type: ignore[union-attr]
    assert [s.status.status_code for s in chats] == [
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    assert [s.attributes.get("error.type") for s in chats] == [  # type: ignore[union-attr]
        "provider_error",
        "provider_error",
        None,
    ]
    assert chats[0].end_time <= chats[1].start_time <= chats[1].end_time <= chats[2].start_time  # type: ignore[operator]
    root = traced.root()
    retries = [e for e in root.events if e.name == "mainspring.retry"]
    assert [e.attributes["mainspring.retry.attempt"] for e in retries] == [1, 2]  # type: ignore[index]
    assert root.status.status_code is StatusCode.UNSET


async def test_a_blocked_call_is_an_error_span_with_a_block_event(traced: Traced) -> None:
    class Gate:
        name = "gate"

        @hookimpl
        def before_tool_call(self, call: Any) -> Block | None:
            return Block("no echo of secret-plans") if call.id == "bad" else None

    await scripted_run(
        [
            [
                faux.tool_call("echo", {"text": "x"}, id="bad"),
                faux.tool_call("echo", {"text": "y"}),
            ],
            faux.text("done"),
        ],
        tools=[echo],
        plugins=[Gate()],
        settings=traced.settings(),
    )
    spans = {s.attributes["gen_ai.tool.call.id"]: s for s in traced.named("execute_tool")}  # type: ignore[index]
    blocked, allowed = spans["bad"], spans["call_1"]
    assert blocked.status.status_code is StatusCode.ERROR
    assert blocked.attributes["error.type"] == "blocked"  # type: ignore[index]
    [event] = blocked.events
    assert event.name == "mainspring.tool.blocked"
    assert dict(event.attributes or {}) == {"mainspring.plugin": "gate"}  # no reason: content
    assert allowed.status.status_code is StatusCode.UNSET
    assert allowed.events == ()
    assert "secret-plans" not in everything_recorded(traced.spans)


async def test_an_abort_ends_the_tool_and_run_spans_as_aborted(traced: Traced) -> None:
    @tool
    async def hang() -> str:
        """Never finish."""
        await asyncio.Event().wait()
        return "never"

    def abort_on_start(agent: Any) -> None:
        def listener(event: Any, signal: Any) -> None:
            if event.type == "tool_execution_start":
                agent.abort()

        agent.subscribe(listener)

    await scripted_run(
        [faux.tool_call("hang", {})],
        tools=[hang],
        settings=traced.settings(),
        before=abort_on_start,
    )
    [tool_span] = traced.named("execute_tool hang")
    assert tool_span.attributes["error.type"] == "aborted"  # type: ignore[index]
    root = traced.root()
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["error.type"] == "aborted"  # type: ignore[index]
    assert root.attributes["mainspring.end_reason"] == "aborted"  # type: ignore[index]
    assert [e.name for e in root.events] == ["mainspring.abort"]
    assert root.status.description is None


async def test_a_context_overflow_shows_a_failed_chat_and_a_compaction_event(
    traced: Traced,
) -> None:
    history = [
        UserMessage(content="earlier question " * 20),
        AssistantMessage(content=(TextContent(text="earlier answer " * 20),), provider="faux"),
    ] * 3
    await scripted_run(
        [faux.error("prompt is too long", status_code=400, context_overflow=True), "fits now"],
        messages=history,
        settings=traced.settings(),
    )
    failed, ok = sorted(traced.named("chat"), key=lambda s: s.start_time or 0)
    assert failed.attributes["error.type"] == "context_overflow"  # type: ignore[index]
    assert ok.status.status_code is StatusCode.UNSET
    [event] = [e for e in traced.root().events if e.name == "mainspring.compaction"]
    attributes = event.attributes or {}
    assert attributes["mainspring.compaction.reason"] == "overflow"
    assert attributes["mainspring.compaction.failed"] is False
    assert (
        attributes["mainspring.compaction.tokens_after"]
        < attributes["mainspring.compaction.tokens_before"]
    )  # type: ignore[operator]
    assert failed.end_time <= event.timestamp <= ok.start_time  # type: ignore[operator]


# -- attributes ---------------------------------------------------------------------------


async def test_attributes_follow_the_genai_conventions(traced: Traced) -> None:
    run = await scripted_run(
        [faux.tool_call("echo", {"text": "hi"}, id="c1"), faux.text("done")],
        tools=[echo],
        settings=traced.settings(agent_name="helper"),
    )
    replies = run.recorder.messages("assistant")
    root = traced.root()
    assert root.name == "invoke_agent helper"
    assert root.attributes is not None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "helper"
    assert root.attributes["gen_ai.provider.name"] == "faux"
    assert root.attributes["gen_ai.request.model"] == "test"
    assert root.attributes["gen_ai.usage.input_tokens"] == sum(
        m.usage.input_tokens for m in replies
    )
    assert root.attributes["gen_ai.usage.output_tokens"] == sum(
        m.usage.output_tokens for m in replies
    )
    chats = sorted(traced.named("chat"), key=lambda s: s.start_time or 0)
    for span, reply in zip(chats, replies, strict=True):
        assert span.kind is trace.SpanKind.CLIENT
        assert span.attributes is not None
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.provider.name"] == "faux"
        assert span.attributes["gen_ai.request.model"] == "test"
        assert "gen_ai.response.model" not in span.attributes  # the model requested
        assert span.attributes["gen_ai.response.finish_reasons"] == (reply.stop_reason,)
        assert span.attributes["gen_ai.usage.input_tokens"] == reply.usage.input_tokens
        assert span.attributes["gen_ai.usage.output_tokens"] == reply.usage.output_tokens
    [tool_span] = traced.named("execute_tool")
    assert dict(tool_span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "gen_ai.tool.call.id": "c1",
    }


async def test_no_content_is_recorded_by_default(traced: Traced) -> None:
    await scripted_run(
        [faux.tool_call("echo", {"text": "argument-words"}), faux.text("reply-words")],
        prompt="prompt-words",
        tools=[echo],
        system_prompt="system-words",
        settings=traced.settings(),
    )
    recorded = everything_recorded(traced.spans)
    for word in ("argument-words", "reply-words", "prompt-words", "system-words"):
        assert word not in recorded
    for span in traced.spans:
        assert not {
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        } & set(span.attributes or {})


async def test_content_when_captured(traced: Traced) -> None:
    await scripted_run(
        [faux.tool_call("login", {"user": "argument-words", "api_key": "k-1"}), "reply-words"],
        prompt="prompt-words",
        tools=[login],
        system_prompt="system-words",
        settings=traced.settings(capture_content=True),
    )
    root = traced.root()
    assert root.attributes is not None
    assert "system-words" in str(root.attributes["gen_ai.system_instructions"])
    first, second = sorted(traced.named("chat"), key=lambda s: s.start_time or 0)
    assert first.attributes is not None and second.attributes is not None
    assert "prompt-words" in str(first.attributes["gen_ai.input.messages"])
    assert '"type":"tool_call"' in str(first.attributes["gen_ai.output.messages"])
    assert "k-1" not in str(first.attributes["gen_ai.output.messages"])
    assert "tool_call_response" in str(second.attributes["gen_ai.input.messages"])
    assert "prompt-words" not in str(second.attributes["gen_ai.input.messages"])
    assert "reply-words" in str(second.attributes["gen_ai.output.messages"])
    [tool_span] = traced.named("execute_tool")
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.tool.call.result"] == "argument-words logged in"
    arguments = str(tool_span.attributes["gen_ai.tool.call.arguments"])
    assert "argument-words" in arguments
    assert "k-1" not in arguments and "[redacted]" in arguments


async def test_steering_is_an_event_of_the_run(traced: Traced) -> None:
    def steer_on_tool(agent: Any) -> None:
        def listener(event: Any, signal: Any) -> None:
            if event.type == "tool_execution_start":
                agent.steer("steer-words")

        agent.subscribe(listener)

    await scripted_run(
        [faux.tool_call("echo", {"text": "x"}), faux.text("done")],
        tools=[echo],
        settings=traced.settings(),
        before=steer_on_tool,
    )
    [event] = [e for e in traced.root().events if e.name == "mainspring.steering"]
    assert dict(event.attributes or {}) == {"mainspring.message.role": "user"}


# -- context, logs, failures --------------------------------------------------------------


async def test_the_run_is_a_child_of_the_current_span_and_a_parent_of_spans_in_tools(
    traced: Traced,
) -> None:
    tracer = traced.provider.get_tracer("app")

    @tool
    def inner() -> str:
        """Open a span of the application's own."""
        with tracer.start_as_current_span("app.work"):
            return "ok"

    with tracer.start_as_current_span("app.request") as request:
        await scripted_run(
            [faux.tool_call("inner", {}), faux.text("done")],
            tools=[inner],
            settings=traced.settings(),
        )
    root = traced.root()
    assert root.parent is not None and root.parent.span_id == request.get_span_context().span_id
    [work] = traced.named("app.work")
    assert work.parent is not None and work.parent.span_id == root.context.span_id
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached


async def test_log_lines_of_a_run_carry_its_trace_and_span_ids(
    traced: Traced, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring")
    await scripted_run(
        [faux.tool_call("echo", {"text": "x"}), faux.text("done")],
        tools=[echo],
        settings=traced.settings(),
    )
    [record] = [r for r in caplog.records if r.getMessage() == "inside_echo"]
    root = traced.root()
    assert record.trace_id == trace.format_trace_id(root.context.trace_id)  # type: ignore[attr-defined]
    assert record.span_id == trace.format_span_id(root.context.span_id)  # type: ignore[attr-defined]


async def test_nothing_is_traced_when_off_or_disabled(traced: Traced) -> None:
    steps = [faux.tool_call("echo", {"text": "x"}), faux.text("done")]
    await scripted_run(steps, tools=[echo], settings=traced.settings(enabled=False))
    await scripted_run(steps, tools=[echo], settings=traced.settings(), disable_plugins=["otel"])
    assert traced.spans == ()


async def test_a_failing_tracer_never_fails_the_run(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no tracer today")

    caplog.set_level(logging.ERROR, logger="mainspring")
    settings = Settings(otel=OtelSettings(enabled=True, tracer_provider=Broken()))
    run = await scripted_run([faux.text("done")], settings=settings)
    assert run.recorder.of_type("agent_end")[0].reason == "stop"
    assert any(r.getMessage() == "otel_failed" for r in caplog.records)


def test_a_tracer_provider_must_be_one() -> None:
    with pytest.raises(ValueError, match="TracerProvider"):
        OtelSettings(tracer_provider="not a provider")


# -- turning it on ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enabled", "environ", "expected"),
    [
        (None, {}, False),
        (None, {"OTEL_TRACES_EXPORTER": "otlp"}, True),
        (None, {"OTEL_TRACES_EXPORTER": "none"}, False),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318"}, True),
        (True, {}, True),
        (False, {"OTEL_TRACES_EXPORTER": "otlp"}, False),
        (True, {"OTEL_SDK_DISABLED": "true"}, False),
        (None, {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, False),
    ],
)
def test_when_tracing_is_on(enabled: bool | None, environ: dict[str, str], expected: bool) -> None:
    assert otel.tracing_enabled(OtelSettings(enabled=enabled), environ) is expected


@pytest.mark.parametrize(
    ("capture", "environ", "expected"),
    [
        (None, {}, False),
        (None, {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, True),
        (False, {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, False),
        (True, {}, True),
    ],
)
def test_when_content_is_captured(
    capture: bool | None, environ: dict[str, str], expected: bool
) -> None:
    assert otel.content_enabled(OtelSettings(capture_content=capture), environ) is expected


# -- no cost when off -----------------------------------------------------------------------

_RUN_ONE = """
import asyncio, sys
{setup}
from mainspring import Settings
from mainspring.logs import configure_logging
from mainspring.settings import OtelSettings
from mainspring.testing import faux, scripted_run

configure_logging("WARNING")
run = asyncio.run(scripted_run([faux.text("done")], settings=Settings(otel=OtelSettings({otel}))))
print(run.recorder.of_type("agent_end")[0].reason)
print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
"""


def _python(code: str, **environ: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(environ)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )


def test_opentelemetry_is_not_imported_unless_tracing_is_on() -> None:
    off = _python(_RUN_ONE.format(setup="", otel=""))
    assert off.stdout.splitlines() == ["stop", "[]"]
    on = _python(_RUN_ONE.format(setup="", otel=""), OTEL_TRACES_EXPORTER="console")
    assert on.stdout.splitlines()[0] == "stop"
    assert "'opentelemetry.trace'" in on.stdout.splitlines()[1]


def test_tracing_on_without_opentelemetry_warns_and_runs() -> None:
    blocked = "sys.modules['opentelemetry'] = None  # as if it were not installed"
    result = _python(_RUN_ONE.format(setup=blocked, otel="enabled=True"))
    assert result.stdout.splitlines()[0] == "stop"
    assert "otel unavailable" in result.stderr  # the warning, as the console prints it
    assert "mainspring[otel]" in result.stderr
