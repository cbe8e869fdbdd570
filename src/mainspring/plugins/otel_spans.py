"""The spans of one traced run, built from its events (imports ``opentelemetry-api``).

``docs/tracing.md`` lists every span, attribute and span event. In short:

- ``invoke_agent`` (``invoke_agent {agent_name}``), INTERNAL, ``agent_start`` to
  ``agent_end``, a child of whatever span is current where the run was started; run
  totals of tokens; span events for retries, compactions, steering, hook errors, aborts.
- ``chat {model}``, CLIENT, one per request attempt: from when the kernel starts
  preparing the request (after any compaction) to the reply's ``message_end``; an
  attempt that failed before streaming ends at its ``retry`` (or at the overflow
  compaction it causes).
- ``execute_tool {name}``, INTERNAL, ``tool_execution_start`` to ``tool_execution_end``
  (parallel calls overlap).

Chat and tool spans are handed to the tracer when they end, with their true start time
and every attribute at once (a span processor's ``on_start`` sees them then); attributes
are few on purpose: with the SDK each costs about a microsecond per span
(``bench/otel.py``). Content (messages, arguments, results, error texts, block reasons)
is recorded only with capture on. While the run is traced its span is the current
OpenTelemetry context of the run's task (spans that providers and tools open are its
children), and its ``trace_id`` and ``span_id`` are bound in structlog's context, so
every log line of the run carries them.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import __version__
from ..settings import OtelSettings
from .otel_content import encode, input_tail, mask_secrets, message_parts, result_text

__all__ = ["RunTrace"]

_tracers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _tracer(provider: Any) -> Any:
    try:
        tracer = _tracers.get(provider)
    except TypeError:  # a provider that cannot be weakly referenced
        return provider.get_tracer("mainspring", __version__)
    if tracer is None:
        tracer = _tracers[provider] = provider.get_tracer("mainspring", __version__)
    return tracer


def _usage_attributes(usage: Any) -> dict[str, int]:
    attributes = {
        "gen_ai.usage.input_tokens": usage.input_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cache_read_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    return attributes


class RunTrace:
    """The spans of one run; :meth:`on_event` returns ``True`` once the run has ended."""

    __slots__ = (
        "attempt",
        "blocked",
        "capture",
        "chat",
        "compaction_ns",
        "input_tokens",
        "limit",
        "model",
        "output_tokens",
        "parent",
        "pending",
        "provider",
        "requests",
        "run_id",
        "saw_abort",
        "span",
        "token",
        "tools",
        "tracer",
        "turns",
    )

    def __init__(self, agent: Any, event: Any, settings: OtelSettings, capture: bool) -> None:
        provider = settings.tracer_provider or trace.get_tracer_provider()
        self.tracer = _tracer(provider)
        self.run_id: str = event.run_id
        self.capture = capture
        self.limit = settings.max_content_chars
        state = agent.state
        self.provider: str = state.model.provider
        self.model: str = state.model.id
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
            "mainspring.run_id": self.run_id,
        }
        name = "invoke_agent"
        if settings.agent_name:
            name = f"invoke_agent {settings.agent_name}"
            attributes["gen_ai.agent.name"] = settings.agent_name
        if capture and state.system_prompt:
            attributes["gen_ai.system_instructions"] = encode(
                [{"type": "text", "content": state.system_prompt}]
            )
        self.span: Span = self.tracer.start_span(
            name, kind=SpanKind.INTERNAL, attributes=attributes
        )
        self.parent = trace.set_span_in_context(self.span)
        self.token = otel_context.attach(self.parent)
        context = self.span.get_span_context()
        if context.is_valid:
            structlog.contextvars.bind_contextvars(
                trace_id=trace.format_trace_id(context.trace_id),
                span_id=trace.format_span_id(context.span_id),
            )
        self.chat: tuple[int, dict[str, Any]] | None = None  # (start ns, attributes)
        self.pending: tuple[int, tuple[Any, ...]] | None = None  # (start ns, messages)
        self.attempt = 0
        self.requests = 0
        self.turns = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.tools: dict[str, tuple[int, dict[str, Any]]] = {}  # id → (start ns, attributes)
        self.blocked: dict[str, tuple[dict[str, Any], int]] = {}  # id → (event attrs, ns)
        self.compaction_ns = 0
        self.saw_abort = False

    # -- the kernel's calls ----------------------------------------------------------------

    def request(self, messages: tuple[Any, ...]) -> None:
        """A request is being prepared (``transform_context``): its start and messages."""
        self.pending = (time.time_ns(), messages)

    def on_event(self, event: Any, signal: Any) -> bool:
        """Update the spans for ``event``; ``True`` when the run has ended.

        An abort is noted (a ``mainspring.abort`` span event) at the first event after
        it that ends something: a tool call, a message, a turn or the run.
        """
        handler = _HANDLERS.get(event.type)
        if handler is None:
            return False
        if signal.aborted and not self.saw_abort and event.type in _ENDINGS:
            self.saw_abort = True
            self.span.add_event("mainspring.abort", {"reason": str(signal.reason)})
        return handler(self, event) is True

    def close(self, reason: str) -> None:
        """End every open span and leave the run's context (the run ended or failed)."""
        if self.chat is not None:
            start, attributes = self.chat
            self._record(f"chat {self.model}", SpanKind.CLIENT, start, attributes, reason)
        for start, attributes in self.tools.values():
            self._record(f"execute_tool {attributes['gen_ai.tool.name']}", SpanKind.INTERNAL,
                         start, attributes, reason)  # fmt: skip
        self.tools.clear()
        self.chat = None
        self.span.end()
        structlog.contextvars.unbind_contextvars("trace_id", "span_id")
        otel_context.detach(self.token)  # logs, never raises, if the context differs

    # -- spans ---------------------------------------------------------------------------

    def _record(
        self,
        name: str,
        kind: SpanKind,
        start: int | None,
        attributes: dict[str, Any],
        error: str | None = None,
        events: tuple[tuple[str, dict[str, Any], int], ...] = (),
    ) -> None:
        """A finished child span of the run, built at once with every attribute.

        Spans are made when they end, with their true start time: one ``start_span`` with
        all attributes costs the SDK about half of ``set_attribute`` calls on an open
        span. ``error`` (a description, or ``""``) sets the ERROR status.
        """
        span = self.tracer.start_span(
            name, context=self.parent, kind=kind, attributes=attributes, start_time=start
        )
        for event_name, event_attributes, timestamp in events:
            span.add_event(event_name, event_attributes, timestamp)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error if self.capture and error else None))
        span.end()

    # -- chat spans ------------------------------------------------------------------------

    def _open_chat(self) -> tuple[int, dict[str, Any]]:
        pending, self.pending = self.pending, None
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
        }
        if self.attempt:
            attributes["mainspring.request.attempt"] = self.attempt
        if self.capture and pending is not None:
            tail = input_tail(pending[1])
            encoded = [m for m in (message_parts(m, self.limit) for m in tail) if m is not None]
            attributes["gen_ai.input.messages"] = encode(encoded)
        self.requests += 1
        return (pending[0] if pending is not None else time.time_ns()), attributes

    def _failed_attempt(self, error_type: str, error: str) -> None:
        """An attempt that failed before streaming: a chat span ending now."""
        if self.chat is None and self.pending is not None:
            start, attributes = self._open_chat()
            attributes["error.type"] = error_type
            self._record(f"chat {self.model}", SpanKind.CLIENT, start, attributes, error)

    def _message_start(self, event: Any) -> None:
        if event.message.role == "assistant" and self.chat is None:
            self.chat = self._open_chat()

    def _message_end(self, event: Any) -> None:
        message = event.message
        role = message.role
        if role != "assistant":
            if role != "tool_result" and self.requests:
                joined = {"mainspring.message.role": role}
                if self.capture:
                    joined["gen_ai.input.messages"] = encode([message_parts(message, self.limit)])
                self.span.add_event("mainspring.steering", joined)
            return
        chat, self.chat = self.chat, None
        if chat is None:
            return
        start, attributes = chat
        usage = message.usage
        self.input_tokens += usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        self.output_tokens += usage.output_tokens
        attributes.update(_usage_attributes(usage))
        if message.model and message.model != self.model:
            attributes["gen_ai.response.model"] = message.model
        attributes["gen_ai.response.finish_reasons"] = (message.stop_reason,)
        if message.response_id:
            attributes["gen_ai.response.id"] = message.response_id
        if self.capture:
            attributes["gen_ai.output.messages"] = encode(
                [message_parts(message, self.limit, output=True)]
            )
        stop = message.stop_reason
        error = None
        if stop == "error" or stop == "aborted":
            attributes["error.type"] = "aborted" if stop == "aborted" else "provider_error"
            error = message.error_message or ""
        self._record(f"chat {self.model}", SpanKind.CLIENT, start, attributes, error)

    def _turn_start(self, event: Any) -> None:
        self.turns += 1
        self.attempt = 0

    def _retry(self, event: Any) -> None:
        self._failed_attempt("provider_error", event.error)
        attributes: dict[str, Any] = {
            "mainspring.retry.attempt": event.attempt,
            "mainspring.retry.max_attempts": event.max_attempts,
            "mainspring.retry.delay_s": event.delay_s,
        }
        if self.capture:
            attributes["error.message"] = event.error
        self.span.add_event("mainspring.retry", attributes)
        self.attempt = event.attempt

    def _compaction_start(self, event: Any) -> None:
        if event.reason == "overflow":
            self._failed_attempt("context_overflow", "the context window was exceeded")
            self.attempt = 0
        self.pending = None
        self.compaction_ns = time.monotonic_ns()

    def _compaction_end(self, event: Any) -> None:
        attributes: dict[str, Any] = {
            "mainspring.compaction.reason": event.reason,
            "mainspring.compaction.tokens_before": event.tokens_before,
            "mainspring.compaction.tokens_after": event.tokens_after,
            "mainspring.compaction.duration_s": (time.monotonic_ns() - self.compaction_ns) / 1e9,
            "mainspring.compaction.failed": event.error is not None,
        }
        if self.capture and event.error is not None:
            attributes["error.message"] = event.error
        self.span.add_event("mainspring.compaction", attributes)

    # -- tool spans ------------------------------------------------------------------------

    def _tool_start(self, event: Any) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool_name,
            "gen_ai.tool.call.id": event.tool_call_id,
        }
        if self.capture:
            attributes["gen_ai.tool.call.arguments"] = encode(mask_secrets(event.args))
        self.tools[event.tool_call_id] = (time.time_ns(), attributes)

    def _tool_decision(self, event: Any) -> None:
        if event.decision == "block" and event.tool_call_id in self.tools:
            attributes = {"mainspring.plugin": str(event.plugin)}
            if self.capture and event.reason:
                attributes["mainspring.reason"] = event.reason
            self.blocked[event.tool_call_id] = (attributes, time.time_ns())

    def _tool_end(self, event: Any) -> None:
        call_id = event.tool_call_id
        started = self.tools.pop(call_id, None)
        if started is None:
            return
        start, attributes = started
        result = event.result
        if self.capture:
            attributes["gen_ai.tool.call.result"] = result_text(result.content, self.limit)
        error = None
        events: tuple[tuple[str, dict[str, Any], int], ...] = ()
        if event.is_error:
            block = self.blocked.pop(call_id, None)
            if block is not None:
                error_type = "blocked"
                events = (("mainspring.tool.blocked", *block),)
            elif self.saw_abort:
                error_type = "aborted"
            elif " timed out after " in result_text(result.content[:1], 200):
                error_type = "timeout"
            else:
                error_type = "tool_error"
            attributes["error.type"] = error_type
            error = result_text(result.content, self.limit) if self.capture else ""
        name = f"execute_tool {event.tool_name}"
        self._record(name, SpanKind.INTERNAL, start, attributes, error, events)

    # -- the run ---------------------------------------------------------------------------

    def _hook_error(self, event: Any) -> None:
        attributes = {
            "mainspring.hook": event.hook,
            "mainspring.plugin": event.plugin,
            "mainspring.outcome": event.outcome,
        }
        if self.capture:
            attributes["error.message"] = event.error
        self.span.add_event("mainspring.hook_error", attributes)

    def _agent_end(self, event: Any) -> bool:
        span = self.span
        span.set_attributes(
            {
                "mainspring.end_reason": event.reason,
                "mainspring.turns": self.turns,
                "gen_ai.usage.input_tokens": self.input_tokens,
                "gen_ai.usage.output_tokens": self.output_tokens,
            }
        )
        if event.reason in ("error", "aborted"):
            span.set_attribute("error.type", event.reason)
            span.set_status(Status(StatusCode.ERROR, event.detail if self.capture else None))
        self.close(f"the run ended ({event.reason})")
        return True


_ENDINGS = frozenset({"tool_execution_end", "message_end", "turn_end", "agent_end"})

_HANDLERS: dict[str, Any] = {
    "turn_end": lambda trace, event: None,
    "agent_end": RunTrace._agent_end,
    "turn_start": RunTrace._turn_start,
    "message_start": RunTrace._message_start,
    "message_end": RunTrace._message_end,
    "tool_execution_start": RunTrace._tool_start,
    "tool_decision": RunTrace._tool_decision,
    "tool_execution_end": RunTrace._tool_end,
    "retry": RunTrace._retry,
    "compaction_start": RunTrace._compaction_start,
    "compaction_end": RunTrace._compaction_end,
    "hook_error": RunTrace._hook_error,
}
"""The events that change spans; the others (``message_update``…) cost a lookup."""
