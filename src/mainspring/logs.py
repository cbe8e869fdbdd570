"""Structured logging: structlog on top of the standard library's ``logging``.

A library must stay quiet unless asked, so mainspring's loggers are stdlib loggers under
``mainspring`` wrapped by structlog: levels and handlers are the application's choice.
:func:`configure_logging` (used by the CLI) installs a console or JSON renderer. Context
bound with :func:`structlog.contextvars.bind_contextvars` (``run_id``, ``turn``,
``tool_call_id``) is merged into every line, and values of keys that look like secrets
are redacted.

An application that configured no logging at all still sees warnings on stderr, as the
standard library's last resort would print them, but whole: the ``mainspring`` logger has
a fallback handler that writes :func:`render_line`'s form, fields included (``mainspring:
warning: hook error (hook=on_event, plugin=x, error=RuntimeError: boom)``), and stays
silent as soon as the root logger has a handler or :func:`configure_logging` ran.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

__all__ = [
    "SECRET_KEY_PATTERN",
    "configure_logging",
    "get_logger",
    "redact_secrets",
    "render_line",
]

SECRET_KEY_PATTERN = re.compile(r"(api[_-]?key|token|secret|password|authorization)", re.I)
"""Keys whose values are never logged."""


def redact_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor replacing secret-looking values with ``"[redacted]"``."""
    for key in list(event_dict):
        if SECRET_KEY_PATTERN.search(key) and key != "event":
            event_dict[key] = "[redacted]"
    return event_dict


_PROCESSORS: list[Any] = [
    structlog.stdlib.filter_by_level,
    structlog.contextvars.merge_contextvars,
    redact_secrets,
    structlog.stdlib.render_to_log_kwargs,
]


def get_logger(name: str) -> Any:
    """A structlog logger over the stdlib logger ``name`` (quiet unless configured)."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
    )


def render_line(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> str:
    """A structlog renderer for a terminal, in the form of the CLI's other messages.

    ``mainspring: warning: plugin disabled (plugin=x, reason=y)``: the level, the event
    name with spaces, its fields in parentheses, then a traceback if there is one.
    """
    event_dict.pop("timestamp", None)
    level = event_dict.pop("level", "info")
    event = str(event_dict.pop("event", "")).replace("_", " ")
    trace = event_dict.pop("exception", None)
    fields = ", ".join(f"{key}={value}" for key, value in event_dict.items())
    line = f"mainspring: {level}: {event}" + (f" ({fields})" if fields else "")
    return f"{line}\n{trace}" if trace else line


class _Fallback(logging.Handler):
    """What the last resort would print, with the record's fields (see the module)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._extras = structlog.stdlib.ExtraAdder()

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return  # the application configured logging: it decides
        try:
            fields = self._extras(logging.getLogger(record.name), "", {"_record": record})
            fields.pop("_record", None)
            fields.update(level=record.levelname.lower(), event=record.getMessage())
            line = render_line(None, "", fields)
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


_FALLBACK = _Fallback()
logging.getLogger("mainspring").addHandler(_FALLBACK)


def configure_logging(level: str = "WARNING", json_output: bool = False) -> None:
    """Send ``mainspring`` logs at ``level`` to stderr, one line each: JSON, or
    :func:`render_line`'s ``mainspring: warning: …`` (JSON lines carry a timestamp)."""
    processors: list[Any] = [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.stdlib.add_log_level,
    ]
    if json_output:
        processors[1:1] = [structlog.processors.TimeStamper(fmt="iso")]
        processors.append(structlog.processors.JSONRenderer())
    else:
        processors += [structlog.processors.format_exc_info, render_line]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=processors,
            foreign_pre_chain=[structlog.stdlib.ExtraAdder(), redact_secrets],
        )
    )
    root = logging.getLogger("mainspring")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
