"""Agent state: the mutable core the kernel owns, and the frozen snapshot everyone else sees."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast, final

from ..messages import AssistantMessage
from .events import MessageUpdate, Phase

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
    streaming: Any = None
    """The message being streamed: an AssistantMessage, the ``message_update`` event whose
    (lazily built) message it is, or None. Sharing the event means state and event hand
    out the very same partial message."""
    pending_tool_calls: dict[str, None] = field(default_factory=dict)
    error_message: str | None = None
    steering: list[Any] = field(default_factory=list)
    follow_up: list[Any] = field(default_factory=list)
    seq: int = 0
    run_id: str | None = None
    turn: int | None = None
    turns_completed: int = 0
    run_task: asyncio.Task[None] | None = None
    listeners: tuple[Any, ...] = ()
    file_locks: Any = None
    remembered_approvals: list[Any] = field(default_factory=list)
    """``Remembered`` approvals: calls allowed for the rest of the session."""
    next_run: tuple[str, int] | None = None
    """Set by :func:`~mainspring.kernel.replay.prepare_replay` for the next run only: its
    ``run_id`` and the last ``seq`` already delivered (not delivered again)."""

    @property
    def streaming_message(self) -> AssistantMessage | None:
        """The message being streamed, built from its snapshot if need be."""
        streaming = self.streaming
        if type(streaming) is MessageUpdate:
            streaming = self.streaming = streaming.message
        return cast("AssistantMessage | None", streaming)

    @streaming_message.setter
    def streaming_message(self, message: AssistantMessage | None) -> None:
        self.streaming = message

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
