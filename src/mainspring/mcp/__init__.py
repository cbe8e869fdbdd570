"""MCP servers as tool bundles: every tool of a configured server is an agent tool.

Needs the ``mcp`` SDK (``pip install 'mainspring[mcp]'``); nothing here is imported
unless a server is configured. See ``docs/mcp.md`` for configuration, lifecycle and the
mapping of results; :mod:`mainspring.plugins.mcp` is the built-in plugin that uses it.
"""

from __future__ import annotations

from .binding import bind, configured_servers, report, status
from .prompts import McpPrompt, PromptArgument, find_prompt, get_prompt, prompts
from .tools import (
    McpResourceTool,
    McpTool,
    escape_control,
    to_tool_result,
    tool_name,
)

__all__ = [
    "McpPrompt",
    "McpResourceTool",
    "McpTool",
    "PromptArgument",
    "bind",
    "configured_servers",
    "escape_control",
    "find_prompt",
    "get_prompt",
    "prompts",
    "report",
    "status",
    "to_tool_result",
    "tool_name",
]
