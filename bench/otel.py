"""W1otel: what tracing with the built-in ``otel`` plugin adds to W1's cost per turn.

W1 (200 turns of one tool call each) is run with tracing off (the default: the plugin is
registered and answers each event with one lookup) and, interleaved in the same
repetitions, with the plugin disabled (its cost while off), and traced through the
OpenTelemetry SDK's ``TracerProvider``: a ``BatchSpanProcessor`` (what a deployment
uses; its export thread's CPU time is counted too) or a ``SimpleSpanProcessor`` feeding
a no-op exporter, or a ``SimpleSpanProcessor`` feeding the SDK's
``InMemorySpanExporter`` (cleared after each run); or through the API's
``NoOpTracerProvider`` (no SDK). Figures: µs per turn added to the run with
tracing off. The floor column is empty: the floor has nothing to trace. The SDK's own
cost is measured alongside: a bare subscriber making the same spans with the same
attributes through the same tracer provider (``_SameSpans``); the target is the plugin's
added cost at most twice that.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from mainspring import Agent, Settings
from mainspring.settings import OtelSettings

from .common import Config, Row, ScriptProvider, median, noop_tool, settle
from .turns import _MS_SCRIPT, TURNS, Measured, _check_mainspring, _interleaved

__all__ = ["run_w1otel"]


def _providers() -> dict[str, tuple[Any, Callable[[], None]]]:
    """The tracer providers to measure, each with what to do after a run."""
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import NoOpTracerProvider

    class NoopExporter(SpanExporter):
        """Takes every span and does nothing with it."""

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    noop = TracerProvider()
    noop.add_span_processor(SimpleSpanProcessor(NoopExporter()))
    batch = TracerProvider()
    batch.add_span_processor(BatchSpanProcessor(NoopExporter()))
    memory_exporter = InMemorySpanExporter()
    memory = TracerProvider()
    memory.add_span_processor(SimpleSpanProcessor(memory_exporter))

    def check_memory() -> None:
        spans = memory_exporter.get_finished_spans()
        memory_exporter.clear()
        if len(spans) != 2 * TURNS:  # the run, a chat span per turn, a tool span per tool turn
            raise RuntimeError(f"W1otel traced {len(spans)} spans, not {2 * TURNS}")

    return {
        "batch": (batch, lambda: batch.force_flush() and None),
        "noop": (noop, lambda: None),
        "memory": (memory, check_memory),
        "api": (NoOpTracerProvider(), lambda: None),
    }


class _SameSpans:
    """The SDK floor: the plugin's spans made by a bare subscriber, nothing else.

    One ``invoke_agent`` span for the run, and per turn one ``chat`` span (at the
    assistant's ``message_end``) and one ``execute_tool`` span (at
    ``tool_execution_end``), each started with the attributes the plugin sets and its
    true start time, as children of the run span; the same tracer and processor. What
    this adds to a run is what the SDK itself costs for those spans in a run: the
    plugin's added cost is compared with it.
    """

    def __init__(self, provider: Any, agent: Agent) -> None:
        from opentelemetry import trace

        self.trace = trace
        self.tracer = provider.get_tracer("floor")
        self.model = agent.state.model
        self.run: Any = None
        self.parent: Any = None
        self.chat_start = 0
        self.tool_start = 0

    def __call__(self, event: Any, signal: Any) -> None:
        kind = event.type
        if kind == "message_start" and event.message.role == "assistant":
            self.chat_start = time.time_ns()
        elif kind == "message_end" and event.message.role == "assistant":
            usage = event.message.usage
            self.tracer.start_span(
                f"chat {self.model.id}",
                context=self.parent,
                kind=self.trace.SpanKind.CLIENT,
                start_time=self.chat_start,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": self.model.provider,
                    "gen_ai.request.model": self.model.id,
                    "gen_ai.usage.input_tokens": usage.input_tokens,
                    "gen_ai.usage.output_tokens": usage.output_tokens,
                    "gen_ai.response.finish_reasons": (event.message.stop_reason,),
                },
            ).end()
        elif kind == "tool_execution_start":
            self.tool_start = time.time_ns()
        elif kind == "tool_execution_end":
            self.tracer.start_span(
                f"execute_tool {event.tool_name}",
                context=self.parent,
                kind=self.trace.SpanKind.INTERNAL,
                start_time=self.tool_start,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.tool_name,
                    "gen_ai.tool.call.id": event.tool_call_id,
                },
            ).end()
        elif kind == "agent_start":
            self.run = self.tracer.start_span(
                "invoke_agent",
                kind=self.trace.SpanKind.INTERNAL,
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.provider.name": self.model.provider,
                    "gen_ai.request.model": self.model.id,
                    "mainspring.run_id": event.run_id,
                },
            )
            self.parent = self.trace.set_span_in_context(self.run)
        elif kind == "agent_end":
            self.run.end()


async def _once(
    otel: OtelSettings, disable: Sequence[str] = (), same_spans: Any = None
) -> Measured:
    provider = ScriptProvider(_MS_SCRIPT)
    agent = Agent(
        model="faux:bench",
        provider=provider,
        autoload=False,
        tools=[noop_tool()],
        disable_plugins=disable,
        settings=Settings(max_turns=10_000, otel=otel),
    )
    marks: list[float] = []
    clock = time.process_time

    def listener(event: Any, signal: Any) -> None:
        if event.type == "turn_end":
            marks.append(clock())

    agent.subscribe(listener)
    if same_spans is not None:
        agent.subscribe(_SameSpans(same_spans, agent))
    settle()
    start = clock()
    await agent.prompt("go")
    total = clock() - start
    _check_mainspring(agent.state.messages, len(marks))
    return Measured(total, [start, *marks])


async def run_w1otel(config: Config) -> list[Row]:
    """µs per turn that tracing adds to W1, per exporter; and the plugin's cost when off."""
    providers = _providers()
    off = OtelSettings(enabled=False)

    def traced(name: str) -> Callable[[], Any]:
        provider, after = providers[name]

        async def variant() -> Measured:
            measured = await _once(OtelSettings(enabled=True, tracer_provider=provider))
            after()
            return measured

        return variant

    async def sdk_floor() -> Measured:
        provider, after = providers["batch"]
        measured = await _once(off, disable=["otel"], same_spans=provider)
        after()
        return measured

    runs = await _interleaved(
        config,
        {
            "off": lambda: _once(off),
            "absent": lambda: _once(off, disable=["otel"]),
            "batch": traced("batch"),
            "noop": traced("noop"),
            "memory": traced("memory"),
            "api": traced("api"),
            "sdk": sdk_floor,
        },
    )
    for provider, _ in providers.values():
        getattr(provider, "shutdown", lambda: None)()
    per_turn = {name: median([m.per_turn_us for m in measured]) for name, measured in runs.items()}
    base = per_turn["off"]

    def added(name: str) -> float:
        return per_turn[name] - base

    sdk_own = max(per_turn["sdk"] - per_turn["absent"], 1e-9)
    plugin_traced = per_turn["batch"] - per_turn["absent"]

    def flat(name: str) -> str:
        return f"flatness {median([m.flatness for m in runs[name]]):.2f}"

    return [
        Row("W1otel per turn, tracing off", f"{base:,.1f} µs", "—", None, "info", None,
            f"the plugin while off costs {base - per_turn['absent']:,.1f} µs/turn"),
        Row("W1otel added per turn, SDK batch + no-op exporter", f"{added('batch'):,.1f} µs",
            "—", None, "info", None, f"{flat('batch')}; the target is the ratio below"),
        Row("W1otel, the SDK alone: the same spans, batch + no-op exporter",
            f"{per_turn['sdk'] - per_turn['absent']:,.1f} µs", "—", None, "info", None,
            "a bare subscriber making the plugin's spans"),
        Row("W1otel SDK batch: the plugin's added cost ÷ the SDK's own",
            f"{plugin_traced / sdk_own:.2f}×", "—", None, "≤2×", plugin_traced <= 2 * sdk_own,
            "each over the run with the plugin disabled"),
        Row("W1otel added per turn, SDK simple + no-op exporter", f"{added('noop'):,.1f} µs",
            "—", None, "info", None, flat("noop")),
        Row("W1otel added per turn, SDK + in-memory exporter", f"{added('memory'):,.1f} µs",
            "—", None, "info", None, flat("memory")),
        Row("W1otel added per turn, API no-op provider", f"{added('api'):,.1f} µs", "—",
            None, "info", None, "opentelemetry-api without an SDK"),
    ]  # fmt: skip
