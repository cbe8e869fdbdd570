"""Transcript invariants: what must hold for a transcript to be sent to a provider.

Checked after every ``transform_context``, ``convert_to_llm`` and ``compact``
implementation; a violation is blamed on the implementation that produced it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .messages import LLM_ROLES, AssistantMessage, ToolCall, ToolResultMessage, UserMessage

__all__ = ["is_sendable", "transcript_problem"]

_FAILED = frozenset({"error", "aborted"})
"""Stop reasons of replies that are kept in the transcript but never sent again."""


def transcript_problem(messages: Sequence[Any], *, llm_only: bool = False) -> str | None:
    """Describe the first broken invariant of ``messages``, or return ``None``.

    - every entry has a string ``role`` (only ``user``/``assistant``/``tool_result`` when
      ``llm_only``);
    - every tool result answers a call of the latest assistant message before it;
    - every tool call of an assistant message gets exactly one result before the next
      assistant message (a trailing assistant message may still await its results only
      when it is the last assistant message and no results follow it at all).
    """
    open_calls: dict[str, bool] | None = None
    open_index = -1
    for index, message in enumerate(messages):
        role = getattr(message, "role", None)
        if not isinstance(role, str):
            return f"message {index} has no role (got {type(message).__name__})"
        if llm_only and role not in LLM_ROLES:
            return f"message {index} has role {role!r}, which a provider cannot take"
        if isinstance(message, AssistantMessage):
            if open_calls:
                problem = _unanswered(open_calls, open_index)
                if problem:
                    return problem
            open_calls = {
                block.id: False for block in message.content if isinstance(block, ToolCall)
            } or None
            open_index = index
        elif isinstance(message, ToolResultMessage):
            if open_calls is None or message.tool_call_id not in open_calls:
                return (
                    f"message {index} is a tool result for call {message.tool_call_id!r}, "
                    "which no preceding assistant message made"
                )
            if open_calls[message.tool_call_id]:
                return f"message {index} is a second result for call {message.tool_call_id!r}"
            open_calls[message.tool_call_id] = True
    return _unanswered(open_calls, open_index)


def _unanswered(open_calls: dict[str, bool] | None, index: int) -> str | None:
    if not open_calls:
        return None
    missing = [call_id for call_id, answered in open_calls.items() if not answered]
    if missing:
        return f"tool call(s) {', '.join(map(repr, missing))} of message {index} have no result"
    return None


def is_sendable(message: Any) -> bool:
    """Whether the built-in converter passes ``message`` to a provider as it is: a user or
    tool-result message, or an assistant message that did not fail."""
    kind = type(message)
    if kind is UserMessage or kind is ToolResultMessage:
        return True
    return kind is AssistantMessage and message.stop_reason not in _FAILED
