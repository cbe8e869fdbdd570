"""Built-in: logs every event at debug level through structlog.

Each line is bound with ``run_id``, ``turn`` and, for tool events, ``tool_call_id``.
Payloads are summarised (types, ids, sizes), never dumped: secrets in arguments or
results stay out of logs. Disable with ``disable_plugins=["event_log"]``.
"""

from __future__ import annotations

import logging
from typing import Any

from ..contract.markers import hookimpl, observes_when
from ..logs import get_logger

__all__ = ["on_event"]

CAPABILITIES = ("observe",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""

log = get_logger("mainspring.events")


_stdlib = logging.getLogger("mainspring.events")


_DEBUG = logging.DEBUG


@hookimpl
@observes_when(lambda agent: _stdlib.isEnabledFor(_DEBUG))
def on_event(event: Any) -> None:
    """Log ``event`` at debug level (not called in a run that started with debug logging off)."""
    if not _stdlib.isEnabledFor(_DEBUG):
        return
    fields: dict[str, Any] = {"seq": event.seq, "run_id": event.run_id, "turn": event.turn}
    call_id = getattr(event, "tool_call_id", None)
    if call_id is not None:
        fields["tool_call_id"] = call_id
        fields["tool_name"] = getattr(event, "tool_name", None)
    message = getattr(event, "message", None)
    if message is not None:
        fields["role"] = getattr(message, "role", None)
    for name in ("reason", "phase", "attempt", "hook", "plugin", "decision", "is_error"):
        value = getattr(event, name, None)
        if value is not None:
            fields[name] = value
    log.debug(event.type, **fields)
