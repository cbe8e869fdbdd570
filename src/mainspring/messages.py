"""Transcript messages: frozen pydantic models discriminated by ``role``.

Every value that crosses the kernel/plugin boundary is immutable: sequences are tuples
and models are frozen, so a listener or a plugin can never change the transcript behind
the kernel's back. Custom message types are any frozen model with a ``role`` outside
``user``/``assistant``/``tool_result``; they live in the transcript and in session files,
and the ``convert_to_llm`` hook decides what the model sees of them.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "LLM_ROLES",
    "AssistantContent",
    "AssistantMessage",
    "CompactionSummary",
    "ImageContent",
    "LLMMessage",
    "Message",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "message_text",
]


def _now() -> float:
    return time.time()


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextContent(_Frozen):
    """A block of plain text."""

    type: Literal["text"] = "text"
    text: str


class ThinkingContent(_Frozen):
    """Model reasoning; ``signature`` is the provider's opaque proof, replayed verbatim."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class ImageContent(_Frozen):
    """An image, base64-encoded in ``data``."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str


class ToolCall(_Frozen):
    """A request from the model to run tool ``name`` with ``arguments``."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Usage(_Frozen):
    """Token accounting for one model response."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        """Every token the response touched, input and output."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


StopReason: TypeAlias = Literal["stop", "length", "tool_use", "error", "aborted"]
UserContent: TypeAlias = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantContent: TypeAlias = Annotated[
    TextContent | ThinkingContent | ToolCall, Field(discriminator="type")
]


class UserMessage(_Frozen):
    """A message from the person (or program) driving the agent."""

    role: Literal["user"] = "user"
    content: str | tuple[UserContent, ...]
    timestamp: float = Field(default_factory=_now)


class AssistantMessage(_Frozen):
    """A model reply, assembled by the kernel from the provider's stream.

    ``stop_reason`` is ``error`` or ``aborted`` for a reply that failed; such a message
    keeps its text and thinking, never an incomplete tool call, and carries the cause in
    ``error_message``.
    """

    role: Literal["assistant"] = "assistant"
    content: tuple[AssistantContent, ...] = ()
    provider: str = ""
    model: str = ""
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    response_id: str | None = None
    timestamp: float = Field(default_factory=_now)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of this reply, in the order the model made them."""
        return tuple(block for block in self.content if isinstance(block, ToolCall))

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


class ToolResultMessage(_Frozen):
    """The outcome of one tool call, sent back to the model."""

    role: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    tool_name: str
    content: tuple[UserContent, ...] = ()
    details: Any = None
    is_error: bool = False
    timestamp: float = Field(default_factory=_now)

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


LLMMessage: TypeAlias = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]
"""The three roles a provider understands."""

Message: TypeAlias = BaseModel
"""Any transcript entry: an :data:`LLMMessage` or a custom frozen model with a ``role``."""


class CompactionSummary(_Frozen):
    """Stands for the messages a compaction removed; rendered to the model as text.

    ``summary`` is what the model is told about the removed part; ``removed`` counts the
    messages it replaces (across repeated compactions).
    """

    role: Literal["compaction"] = "compaction"
    summary: str
    removed: int = 0
    tokens_before: int = 0
    details: Any = None
    timestamp: float = Field(default_factory=_now)


LLM_ROLES: frozenset[str] = frozenset({"user", "assistant", "tool_result"})


def message_text(message: BaseModel) -> str:
    """Best-effort plain text of any message, for logs, estimates and terminals."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ThinkingContent):
            parts.append(block.thinking)
    return "".join(parts)
