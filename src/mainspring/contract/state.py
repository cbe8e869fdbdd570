"""The frozen snapshot of an agent that plugins and applications see: :class:`AgentState`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

if TYPE_CHECKING:
    from ..events import Phase
    from ..messages import AssistantMessage
    from ..providers.base import Model, ThinkingLevel
    from ..tools import Tool

__all__ = ["AgentState"]


@final
@dataclass(frozen=True, slots=True)
class AgentState:
    """An immutable snapshot of an agent.

    ``messages`` is the transcript; ``streaming_message`` the assistant message being
    streamed (``None`` otherwise); ``pending_tool_calls`` the ids between their
    ``tool_execution_start`` and ``tool_execution_end``; ``error_message`` the text of the
    last run's failure (cleared when the next run starts). ``run_id`` and ``turn`` locate
    the snapshot in the active run (``None`` when idle / outside a turn);
    ``turns_completed`` counts the turns the active (or last) run has ended.
    """

    messages: tuple[Any, ...]
    tools: tuple[Tool, ...]
    system_prompt: str
    model: Model
    thinking_level: ThinkingLevel
    phase: Phase
    is_streaming: bool
    streaming_message: AssistantMessage | None
    pending_tool_calls: frozenset[str]
    error_message: str | None
    steering_queue: tuple[Any, ...]
    follow_up_queue: tuple[Any, ...]
    run_id: str | None = None
    turn: int | None = None
    turns_completed: int = 0
