"""Structured logging: structlog on top of the standard library's ``logging``.

A library must stay quiet unless asked, so mainspring's loggers are stdlib loggers under
``mainspring`` wrapped by structlog: levels and handlers are the application's choice.
:func:`configure_logging` (used by the CLI) installs a console or JSON renderer. Context
bound with :func:`structlog.contextvars.bind_contextvars` (``run_id``, ``turn``,
``tool_call_id``) is merged into every line, and values of keys that look like secrets
are redacted.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

__all__ = ["SECRET_KEY_PATTERN", "configure_logging", "get_logger", "redact_secrets"]

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


def configure_logging(level: str = "WARNING", json_output: bool = False) -> None:
    """Send ``mainspring`` logs at ``level`` to stderr, rendered as console or JSON lines."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_output
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.TimeStamper(fmt="iso"),
                structlog.stdlib.add_log_level,
                renderer,
            ],
            foreign_pre_chain=[structlog.stdlib.ExtraAdder(), redact_secrets],
        )
    )
    root = logging.getLogger("mainspring")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
