"""Tracing set up by the ``mainspring`` command (needs ``opentelemetry-sdk``).

- :func:`exporting_provider`: when tracing is on (settings or ``OTEL_*`` variables) and
  the process has no SDK tracer provider of its own (``opentelemetry-instrument`` sets
  one), a ``TracerProvider`` exporting through a ``BatchSpanProcessor`` to each exporter
  ``OTEL_TRACES_EXPORTER`` names (``otlp`` when only an OTLP endpoint is set), looked up
  in the ``opentelemetry_traces_exporter`` entry points, as the SDK's own
  auto-configuration does (``otlp`` needs ``opentelemetry-exporter-otlp``).
- :class:`ConsoleTrace` (``mainspring run --trace``): collects the run's spans with the
  SDK's ``InMemorySpanExporter`` (on the application's SDK provider if there is one, so
  its exporters still get every span) and renders them as a tree a person can read:
  durations, tokens, finish reasons, errors and span events.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

__all__ = ["ConsoleTrace", "exporting_provider", "render_tree"]


def _sdk_provider() -> TracerProvider | None:
    provider = trace.get_tracer_provider()
    return provider if isinstance(provider, TracerProvider) else None


def _new_provider() -> TracerProvider:
    return TracerProvider(resource=Resource.create({"service.name": "mainspring"}))


def exporting_provider(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """A provider exporting as the ``OTEL_*`` variables say, or ``None`` when the
    application has its own SDK provider or no exporter is named.

    Raises ``ValueError`` naming an exporter that is not installed.
    """
    if _sdk_provider() is not None:
        return None
    from importlib_metadata import entry_points

    env = os.environ if environ is None else environ
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    if not names and endpoint:
        names = ["otlp"]
    names = [name for name in names if name != "none"]
    if not names:
        return None
    found = {ep.name: ep for ep in entry_points(group="opentelemetry_traces_exporter")}
    provider = _new_provider()
    for name in names:
        if name not in found:
            raise ValueError(
                f"OTEL_TRACES_EXPORTER names {name!r}, which is not installed "
                f"(known: {', '.join(sorted(found)) or 'none'}; otlp comes with "
                "opentelemetry-exporter-otlp)"
            )
        provider.add_span_processor(BatchSpanProcessor(found[name].load()()))
    return provider


class ConsoleTrace:
    """Collects the spans of ``mainspring run --trace`` and renders them."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = provider or _sdk_provider() or _new_provider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def render(self) -> str:
        """The spans collected so far as a tree (one per trace)."""
        return render_tree(self.exporter.get_finished_spans())

    def shutdown(self) -> None:
        """Flush and stop the provider's processors (exports what is pending)."""
        self.provider.shutdown()


def _duration(nanoseconds: int) -> str:
    if nanoseconds < 1_000_000:
        return f"{nanoseconds / 1_000:.0f} µs"
    if nanoseconds < 1_000_000_000:
        return f"{nanoseconds / 1_000_000:.1f} ms"
    return f"{nanoseconds / 1_000_000_000:.2f} s"


def _summary(span: ReadableSpan) -> str:
    attributes: Mapping[str, Any] = span.attributes or {}
    parts = [span.name, _duration((span.end_time or 0) - (span.start_time or 0))]
    if "gen_ai.usage.input_tokens" in attributes:
        tokens_in = attributes["gen_ai.usage.input_tokens"]
        parts.append(f"tokens {tokens_in} in, {attributes.get('gen_ai.usage.output_tokens')} out")
    reasons = attributes.get("gen_ai.response.finish_reasons")
    if reasons:
        parts.append(",".join(str(reason) for reason in reasons))
    if "mainspring.end_reason" in attributes:
        parts.append(str(attributes["mainspring.end_reason"]))
    if "mainspring.request.attempt" in attributes:
        parts.append(f"attempt {attributes['mainspring.request.attempt']}")
    if span.status.status_code is StatusCode.ERROR:
        error = f"ERROR {attributes.get('error.type', '')}".rstrip()
        if span.status.description:
            error += f": {span.status.description}"
        parts.append(error)
    return "  ".join(parts)


def _event_line(name: str, attributes: Mapping[str, Any] | None) -> str:
    fields = " ".join(
        f"{key.removeprefix('mainspring.')}={value}" for key, value in (attributes or {}).items()
    )
    return f"· {name.removeprefix('mainspring.')} {fields}".rstrip()


def render_tree(spans: Sequence[ReadableSpan]) -> str:
    """``spans`` as indented trees: each span with its children and span events, in the
    order they started or happened; spans whose parent is not among them are roots."""
    ids = {span.context.span_id for span in spans if span.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def walk(span: ReadableSpan, prefix: str, lead: str) -> None:
        lines.append(f"{lead}{_summary(span)}")
        items: list[tuple[int, str, Any]] = [
            (child.start_time or 0, "span", child)
            for child in children.get(span.context.span_id if span.context else None, [])
        ]
        items += [(event.timestamp, "event", event) for event in span.events]
        items.sort(key=lambda item: item[0])
        for index, (_, kind, item) in enumerate(items):
            last = index == len(items) - 1
            branch, carry = ("└─ ", "   ") if last else ("├─ ", "│  ")
            if kind == "span":
                walk(item, prefix + carry, prefix + branch)
            else:
                lines.append(f"{prefix}{branch}{_event_line(item.name, item.attributes)}")

    for root in sorted(children.get(None, []), key=lambda span: span.start_time or 0):
        if root.context is not None:
            lines.append(f"trace {trace.format_trace_id(root.context.trace_id)}")
        walk(root, "", "")
    return "\n".join(lines)
