"""Agent state: the mutable core the kernel owns, and the frozen snapshot everyone else sees."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, final

from ..messages import AssistantMessage
from .events import Phase

if TYPE_CHECKING:
    from ..providers.base import Model, ThinkingLevel
    from ..tools import Tool
    from .transcript import Transcript

__all__ = ["AgentState", "Core"]


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


@final
@dataclass(slots=True, eq=False)
class Core:
    """The kernel's mutable state of one agent. Only the kernel writes it."""

    messages: Transcript
    tools: dict[str, Tool]
    system_prompt: str
    model: Model
    thinking_level: ThinkingLevel
    phase: Phase = "idle"
    is_streaming: bool = False
    streaming_message: AssistantMessage | None = None
    pending_tool_calls: dict[str, None] = field(default_factory=dict)
    error_message: str | None = None
    steering: list[Any] = field(default_factory=list)
    follow_up: list[Any] = field(default_factory=list)
    seq: int = 0
    run_id: str | None = None
    turn: int | None = None
    turns_completed: int = 0
    run_task: asyncio.Task[None] | None = None
    listeners: list[Any] = field(default_factory=list)
    file_locks: Any = None

    def snapshot(self) -> AgentState:
        """A frozen copy of the current state."""
        return AgentState(
            messages=self.messages.as_tuple(),
            tools=tuple(self.tools.values()),
            system_prompt=self.system_prompt,
            model=self.model,
            thinking_level=self.thinking_level,
            phase=self.phase,
            is_streaming=self.is_streaming,
            streaming_message=self.streaming_message,
            pending_tool_calls=frozenset(self.pending_tool_calls),
            error_message=self.error_message,
            steering_queue=tuple(self.steering),
            follow_up_queue=tuple(self.follow_up),
            run_id=self.run_id,
            turn=self.turn,
            turns_completed=self.turns_completed,
        )
