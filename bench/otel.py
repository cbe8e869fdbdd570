"""W1otel: what tracing with the built-in ``otel`` plugin adds to W1's cost per turn.

W1 (200 turns of one tool call each) is run with tracing off (the default: the plugin is
registered and answers each event with one lookup) and, interleaved in the same
repetitions, with the plugin disabled (its cost while off), and traced through the
OpenTelemetry SDK's ``TracerProvider``: a ``BatchSpanProcessor`` (what a deployment
uses; its export thread's CPU time is counted too) or a ``SimpleSpanProcessor`` feeding
a no-op exporter, or a ``SimpleSpanProcessor`` feeding the SDK's
``InMemorySpanExporter`` (cleared after each run); or through the API's
``NoOpTracerProvider`` (no SDK). Figures: µs per turn added to the run with
tracing off. The floor column is empty: the floor has nothing to trace.
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


async def _once(otel: OtelSettings, disable: Sequence[str] = ()) -> Measured:
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

    runs = await _interleaved(
        config,
        {
            "off": lambda: _once(off),
            "absent": lambda: _once(off, disable=["otel"]),
            "batch": traced("batch"),
            "noop": traced("noop"),
            "memory": traced("memory"),
            "api": traced("api"),
        },
    )
    for provider, _ in providers.values():
        getattr(provider, "shutdown", lambda: None)()
    per_turn = {name: median([m.per_turn_us for m in measured]) for name, measured in runs.items()}
    base = per_turn["off"]

    def added(name: str) -> float:
        return per_turn[name] - base

    def flat(name: str) -> str:
        return f"flatness {median([m.flatness for m in runs[name]]):.2f}"

    return [
        Row("W1otel per turn, tracing off", f"{base:,.1f} µs", "—", None, "info", None,
            f"the plugin while off costs {base - per_turn['absent']:,.1f} µs/turn"),
        Row("W1otel added per turn, SDK batch + no-op exporter", f"{added('batch'):,.1f} µs",
            "—", None, "≤30 µs", added("batch") <= 30, flat("batch")),
        Row("W1otel added per turn, SDK simple + no-op exporter", f"{added('noop'):,.1f} µs",
            "—", None, "info", None, flat("noop")),
        Row("W1otel added per turn, SDK + in-memory exporter", f"{added('memory'):,.1f} µs",
            "—", None, "info", None, flat("memory")),
        Row("W1otel added per turn, API no-op provider", f"{added('api'):,.1f} µs", "—",
            None, "info", None, "opentelemetry-api without an SDK"),
    ]  # fmt: skip
