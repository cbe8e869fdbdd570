"""mainspring: an agent kernel.

The public surface for plugin authors and embedders. Everything not listed in
``__all__`` is private.
"""

from .agent import Agent, RunOptions
from .contract.agent_view import AgentView
from .contract.decisions import (
    Approval,
    ApprovalRequest,
    Ask,
    Block,
    CompactionResult,
    Edit,
    NextTurn,
)
from .contract.errors import (
    AgentBusyError,
    CapabilityError,
    HookError,
    HookTimeoutError,
    PluginLoadError,
    StopRun,
)
from .contract.markers import hookimpl, nonblocking, redactor
from .contract.state import AgentState
from .message_json import CustomMessage, decode_message, encode_message
from .messages import (
    AssistantMessage,
    CompactionSummary,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolArgs,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    freeze,
    thaw,
)
from .providers.base import Model, ModelRequest, Provider, ProviderError, ToolSpec
from .settings import Settings
from .signal import AbortSignal, RunAborted
from .tool_decorator import tool
from .tools import Tool, ToolArgumentsError, ToolContext, ToolResult

__version__ = "0.1.0"

__all__ = [
    "AbortSignal",
    "Agent",
    "AgentBusyError",
    "AgentState",
    "AgentView",
    "Approval",
    "ApprovalRequest",
    "Ask",
    "AssistantMessage",
    "Block",
    "CapabilityError",
    "CompactionResult",
    "CompactionSummary",
    "CustomMessage",
    "Edit",
    "HookError",
    "HookTimeoutError",
    "ImageContent",
    "Message",
    "Model",
    "ModelRequest",
    "NextTurn",
    "PluginLoadError",
    "Provider",
    "ProviderError",
    "RunAborted",
    "RunOptions",
    "Settings",
    "StopRun",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolArgs",
    "ToolArgumentsError",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "__version__",
    "decode_message",
    "encode_message",
    "freeze",
    "hookimpl",
    "nonblocking",
    "redactor",
    "thaw",
    "tool",
]
