"""Built-in (essential): the default ``convert_to_llm``, run last.

Keeps only what a provider can take: user and tool-result messages, and assistant
messages that completed. Assistant messages that ended in ``error`` or ``aborted`` are
dropped (their tool calls were never executed), and so is every custom role except the
built-in compaction summary, which becomes a user message; a plugin that wants the model
to see its own custom message converts it in an earlier implementation.
"""

from __future__ import annotations

from typing import Any

from ..contract.markers import hookimpl
from ..invariants import is_sendable
from ..messages import AssistantMessage, CompactionSummary, ToolResultMessage, UserMessage

__all__ = ["convert_to_llm", "is_sendable", "render_summary"]

CAPABILITIES = ("context",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""


def render_summary(summary: CompactionSummary) -> UserMessage:
    """The user message the model sees in place of a compacted part of the transcript."""
    return UserMessage(
        content=(
            f"[The earlier part of this conversation ({summary.removed} messages) was "
            f"compacted to fit the context window.]\n{summary.summary}"
        ),
        timestamp=summary.timestamp,
    )


_FAILED = frozenset({"error", "aborted"})


def _first_to_convert(messages: tuple[Any, ...]) -> int | None:
    """The index of the first message that is not sendable as it is (one cheap pass)."""
    for index, message in enumerate(messages):
        if not is_sendable(message):
            return index
    return None


@hookimpl(trylast=True)
def convert_to_llm(messages: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Drop custom roles and failed assistant messages (``None`` when nothing changes)."""
    index = _first_to_convert(messages)
    if index is None:
        return None
    kept: list[Any] = list(messages[:index])
    for message in messages[index:]:
        if isinstance(message, AssistantMessage):
            if message.stop_reason not in _FAILED:
                kept.append(message)
        elif isinstance(message, UserMessage | ToolResultMessage):
            kept.append(message)
        elif isinstance(message, CompactionSummary):
            kept.append(render_summary(message))
    return tuple(kept)
