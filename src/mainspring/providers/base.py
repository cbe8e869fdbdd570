"""The provider contract: a request in, a stream of deltas out.

A provider never builds messages; it yields :data:`StreamEvent` values and the kernel
assembles the :class:`~mainspring.AssistantMessage`. A failure is raised as
:class:`ProviderError`; the kernel classifies it (retry, compaction, or an error message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ..messages import StopReason, Usage
from ..signal import AbortSignal

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "Model",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "ThinkingLevel",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolSpec",
    "UsageReport",
]

DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_OUTPUT_TOKENS = 8_192

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high"]


class Model(BaseModel):
    """A model a provider can serve; costs are USD per million tokens."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    provider: str
    id: str
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    reasoning: bool = False
    cost_input_per_mtok: float = 0.0
    cost_output_per_mtok: float = 0.0
    cost_cache_read_per_mtok: float = 0.0
    cost_cache_write_per_mtok: float = 0.0

    @property
    def ref(self) -> str:
        """The ``provider:id`` string that resolves to this model."""
        return f"{self.provider}:{self.id}"

    def cost(self, usage: Usage) -> float:
        """The USD cost of ``usage`` at this model's prices."""
        return (
            usage.input_tokens * self.cost_input_per_mtok
            + usage.output_tokens * self.cost_output_per_mtok
            + usage.cache_read_tokens * self.cost_cache_read_per_mtok
            + usage.cache_write_tokens * self.cost_cache_write_per_mtok
        ) / 1_000_000


class ToolSpec(BaseModel):
    """What the model is told about a tool: its name, purpose and JSON-Schema parameters."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(BaseModel):
    """Everything a provider needs for one model call.

    ``messages`` are LLM messages only (user, assistant, tool_result): the output of the
    ``convert_to_llm`` hook. ``session_id`` identifies the conversation (the agent's
    ``session_id``): a provider with prompt caching keyed by conversation may use it.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)

    model: Model
    system_prompt: str = ""
    messages: tuple[Any, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    thinking_level: ThinkingLevel = "off"
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of reply text."""

    text: str
    type: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of reasoning; a ``signature`` may arrive with any delta of the block."""

    text: str
    signature: str | None = None
    type: Literal["thinking_delta"] = field(default="thinking_delta", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """The model starts a tool call."""

    id: str
    name: str
    type: Literal["tool_call_start"] = field(default="tool_call_start", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call's JSON arguments."""

    id: str
    arguments_json_fragment: str
    type: Literal["tool_call_delta"] = field(default="tool_call_delta", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """The tool call's arguments are complete."""

    id: str
    type: Literal["tool_call_end"] = field(default="tool_call_end", init=False)


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Token usage so far; a later report replaces an earlier one."""

    usage: Usage
    type: Literal["usage"] = field(default="usage", init=False)


@dataclass(frozen=True, slots=True)
class StreamDone:
    """The reply is complete. A stream that ends without it is an error."""

    stop_reason: StopReason
    response_id: str | None = None
    type: Literal["done"] = field(default="done", init=False)


StreamEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | UsageReport
    | StreamDone
)


class ProviderError(Exception):
    """A model call failed.

    ``retryable`` marks transient failures (429, 5xx, connection, timeout) that the kernel
    retries with backoff; ``retry_after`` is the server's hint in seconds;
    ``context_overflow`` marks "prompt too long", which triggers one compaction and one
    re-send.
    """

    def __init__(
        self,
        message: str,
        retryable: bool = False,
        status_code: int | None = None,
        retry_after: float | None = None,
        context_overflow: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status_code = status_code
        self.retry_after = retry_after
        self.context_overflow = context_overflow

    def __repr__(self) -> str:
        return (
            f"ProviderError({self.message!r}, retryable={self.retryable}, "
            f"status_code={self.status_code}, retry_after={self.retry_after}, "
            f"context_overflow={self.context_overflow})"
        )


@runtime_checkable
class Provider(Protocol):
    """What a model backend implements.

    ``stream`` is an async generator (or any async iterator) of :data:`StreamEvent`;
    it must end with :class:`StreamDone`, raise :class:`ProviderError` on failure, and
    stop promptly once ``signal`` is aborted. A provider may expose ``models`` (a
    catalogue: ``dict[str, Model]``) so ``"name:id"`` strings resolve to full models.
    """

    name: str

    def stream(self, request: ModelRequest, signal: AbortSignal) -> AsyncIterator[StreamEvent]:
        """Stream the reply to ``request``."""
        ...
