"""MCP servers as tool bundles: every tool of a configured server is an agent tool.

Needs the ``mcp`` SDK (``pip install 'mainspring[mcp]'``); nothing here is imported
unless a server is configured. See ``docs/mcp.md`` for configuration, lifecycle and the
mapping of results; :mod:`mainspring.plugins.mcp` is the built-in plugin that uses it.
"""

from __future__ import annotations

from .binding import bind, configured_servers, report, status
from .tools import (
    McpResourceTool,
    McpTool,
    escape_control,
    to_tool_result,
    tool_name,
)

__all__ = [
    "McpResourceTool",
    "McpTool",
    "bind",
    "configured_servers",
    "escape_control",
    "report",
    "status",
    "to_tool_result",
    "tool_name",
]
