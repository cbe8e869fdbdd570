"""Agent state: the mutable core the kernel owns (the frozen snapshot everyone else sees is
:class:`~mainspring.contract.state.AgentState`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast, final

from ..contract.state import AgentState
from ..events import MessageUpdate, Phase
from ..messages import AssistantMessage

if TYPE_CHECKING:
    from ..providers.base import Model, ThinkingLevel
    from ..tools import Tool
    from .transcript import Transcript

__all__ = ["Core"]


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
