"""Built-in: OpenTelemetry traces of runs, following the semantic conventions for GenAI.

Off unless turned on (:class:`~mainspring.settings.OtelSettings`, ``[otel]`` in the
config file, or the standard ``OTEL_*`` environment variables; see
:func:`tracing_enabled`). While off, nothing of OpenTelemetry is imported and each event
costs one dictionary lookup. While on, every run is one ``invoke_agent`` span with
``chat {model}`` spans (one per model request, retried attempts included) and
``execute_tool {name}`` spans as its children; :mod:`mainspring.plugins.otel_spans`
says what each span carries. Spans go to ``settings.otel.tracer_provider`` if set, else
to the application's global tracer provider.

The plugin observes; it never changes a run. Its ``transform_context`` (called after
every other transform, the policy pack's redaction included) returns ``None`` and only
notes when a request starts and what it sends. A failure inside the
tracing code is logged once and ends the tracing of that run, never the run.

Content (message text, tool arguments and results) is recorded only when
``capture_content`` is on; see ``docs/tracing.md`` for what is recorded and how it
relates to redaction. Disable the plugin with ``disable_plugins=["otel"]``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..contract.markers import hookimpl, observes_when, redactor
from ..logs import get_logger

if TYPE_CHECKING:
    from ..settings import OtelSettings, Settings

__all__ = [
    "configure_command",
    "content_enabled",
    "on_event",
    "traced_runs",
    "tracing_enabled",
    "transform_context",
]

CAPABILITIES = ("observe", "context")
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""

log = get_logger("mainspring.otel")

_TRUE = frozenset({"1", "true", "yes", "on"})

_traces: dict[int, Any] = {}
"""``id(agent)`` → the :class:`~mainspring.plugins.otel_spans.RunTrace` of its run."""

_warned_missing = False


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def tracing_enabled(settings: OtelSettings, environ: Mapping[str, str] | None = None) -> bool:
    """Whether runs are traced under ``settings`` and ``environ`` (default ``os.environ``).

    ``OTEL_SDK_DISABLED=true`` turns tracing off. Otherwise ``settings.enabled`` decides
    when set; when ``None``, tracing is on if ``OTEL_TRACES_EXPORTER`` names an exporter
    other than ``none``, or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set.
    """
    env = os.environ if environ is None else environ
    if _flag(env.get("OTEL_SDK_DISABLED")):
        return False
    if settings.enabled is not None:
        return settings.enabled
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter and exporter != "none":
        return True
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def content_enabled(settings: OtelSettings, environ: Mapping[str, str] | None = None) -> bool:
    """Whether content is recorded: ``settings.capture_content`` when set, else
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``."""
    if settings.capture_content is not None:
        return settings.capture_content
    env = os.environ if environ is None else environ
    return _flag(env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"))


def traced_runs() -> int:
    """How many runs are being traced right now (all agents of the process)."""
    return len(_traces)


def _begin(event: Any, agent: Any) -> None:
    """At ``agent_start``: start tracing the run if tracing is on for ``agent``."""
    global _warned_missing
    settings = agent.settings.otel
    if not tracing_enabled(settings):
        return
    try:
        from . import otel_spans
    except ImportError as error:
        if not _warned_missing:
            _warned_missing = True
            log.warning(
                "otel_unavailable",
                error=str(error),
                hint="tracing is on but opentelemetry-api is not installed: "
                "pip install 'mainspring[otel]'",
            )
        return
    try:
        trace = otel_spans.RunTrace(agent, event, settings, content_enabled(settings))
    except Exception as error:
        log.error("otel_failed", error=repr(error), run_id=event.run_id)
        return
    _traces[id(agent)] = trace


def _failed(agent: Any, trace: Any, error: BaseException) -> None:
    """Stop tracing ``agent``'s run after a failure of the tracing code itself."""
    _traces.pop(id(agent), None)
    log.error("otel_failed", error=repr(error), run_id=trace.run_id)
    with contextlib.suppress(Exception):  # best effort after a failure
        trace.close("tracing failed")


def _tracing(agent: Any) -> bool:
    return id(agent) in _traces or tracing_enabled(agent.settings.otel)


@hookimpl
@observes_when(_tracing)
def on_event(event: Any, agent: Any, signal: Any) -> None:
    """Feed ``event`` to the run's trace; start one at ``agent_start`` when tracing is on."""
    trace = _traces.get(id(agent))
    if trace is None or trace.run_id != event.run_id:
        if trace is not None:  # a run that never ended (it cannot happen; be safe)
            _failed(agent, trace, RuntimeError("run ended without agent_end"))
        if event.type == "agent_start":
            _begin(event, agent)
        return
    try:
        if trace.on_event(event, signal):
            del _traces[id(agent)]
    except Exception as error:
        _failed(agent, trace, error)


@hookimpl(trylast=True)
@redactor
def transform_context(messages: tuple[Any, ...], agent: Any) -> None:
    """Note that a request is being prepared and what it sends; never changes it.

    Marked a redactor (and ``trylast``) only for its place in the chain: the kernel calls
    it after every transform that is not a redactor, the policy pack's redaction
    included, so it records the messages as the model is sent them.
    """
    trace = _traces.get(id(agent))
    if trace is not None:
        try:
            trace.request(messages)
        except Exception as error:
            _failed(agent, trace, error)


def configure_command(settings: Settings, console: bool) -> tuple[Settings, Callable[[], str]]:
    """Tracing for the ``mainspring`` command: ``settings`` with a tracer provider, and a
    ``finish()`` to call when the run is over (flushes; returns the span tree, or ``""``).

    With ``console`` (``--trace``) tracing is on and the run's spans are collected for
    the tree. Otherwise, when tracing is on and the process has no SDK tracer provider,
    one exporting as the ``OTEL_*`` variables say is set up
    (:func:`~mainspring.plugins.otel_console.exporting_provider`). Raises ``ValueError``
    when that needs ``opentelemetry-sdk`` or an exporter that is not installed.
    """
    if not console and not tracing_enabled(settings.otel):
        return settings, str
    try:
        from . import otel_console
    except ImportError as error:
        raise ValueError(
            f"tracing needs opentelemetry-sdk ({error}): pip install 'mainspring[otel]'"
        ) from error
    provider = settings.otel.tracer_provider or otel_console.exporting_provider()
    update: dict[str, Any] = {"enabled": True} if console else {}
    if console:
        view = otel_console.ConsoleTrace(provider)
        provider = view.provider

        def finish() -> str:
            tree = view.render()
            view.shutdown()
            return tree

    else:

        def finish() -> str:
            if provider is not None:
                provider.force_flush()
            return ""

    if provider is not None:
        update["tracer_provider"] = provider
    otel_settings = settings.otel.model_copy(update=update)
    return settings.model_copy(update={"otel": otel_settings}), finish
