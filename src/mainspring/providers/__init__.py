"""Model providers: the :class:`Provider` protocol, stream events and built-in backends."""

from .base import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_OUTPUT_TOKENS,
    Model,
    ModelRequest,
    Provider,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingLevel,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
    UsageReport,
)

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
