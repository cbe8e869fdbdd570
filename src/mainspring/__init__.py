"""mainspring: an agent kernel.

The public surface for plugin authors and embedders. Everything not listed in
``__all__`` is private.
"""

from .errors import AgentBusyError, Block, CompactionResult, HookError, PluginLoadError, StopRun
from .kernel.signal import AbortSignal
from .messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .providers.base import Model, ModelRequest, Provider, ProviderError, ToolSpec
from .settings import Settings
from .tools import Tool, ToolContext, ToolResult

__version__ = "0.1.0"

__all__ = [
    "AbortSignal",
    "AgentBusyError",
    "AssistantMessage",
    "Block",
    "CompactionResult",
    "HookError",
    "ImageContent",
    "Message",
    "Model",
    "ModelRequest",
    "PluginLoadError",
    "Provider",
    "ProviderError",
    "Settings",
    "StopRun",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "__version__",
]
