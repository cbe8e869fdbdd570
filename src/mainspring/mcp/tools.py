"""MCP tools as mainspring tools, and MCP tool results as :class:`~mainspring.ToolResult`.

A server tool ``t`` becomes an :class:`McpTool` named ``t`` (or ``PREFIX_t`` with a
``tool_prefix``; characters a model API refuses in names become ``_``). Its parameters
are the server's input schema, so the kernel validates the model's arguments against it
before any gate runs. Its description is the server's, and ``timeout_s`` is the server's.

Results: text blocks stay text; images stay images; an embedded text resource becomes a
text block headed by its URI, an embedded image blob an image, any other blob, audio or
resource link a one-line text description. ``is_error`` is the server's ``isError``.
``details`` is ``{"server", "tool", "structured_content", "resources"}``: the structured
result (``structuredContent``) and the URIs, MIME types and sizes of the non-text
blocks. A result with no content but a structured part shows the model that part as
JSON.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import mcp_types as types

from ..messages import ImageContent, TextContent
from ..settings import McpServerSettings
from ..tools import Tool, ToolContext, ToolResult
from . import runtime
from .connection import Connection, ServerFailure

__all__ = ["McpTool", "to_tool_result", "tool_name"]

_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(prefix: str | None, name: str) -> str:
    """The mainspring name of the server tool ``name``."""
    full = f"{prefix}_{name}" if prefix else name
    return _NAME_OK.sub("_", full)[:64]


class McpTool(Tool):
    """A tool served by an MCP server: ``server`` names it, ``remote_name`` is its name there."""

    __slots__ = ("connection", "remote_name", "server")

    def __init__(
        self, server: str, settings: McpServerSettings, connection: Connection, remote: types.Tool
    ) -> None:
        schema = dict(remote.input_schema) if remote.input_schema else {}
        schema.setdefault("type", "object")
        super().__init__(
            name=tool_name(settings.tool_prefix, remote.name),
            description=remote.description or remote.title or remote.name,
            parameters=schema,
            execute=self._call,
            timeout_s=settings.timeout_s,
            label=f"{server}: {remote.title or remote.name}",
        )
        self.server = server
        self.connection = connection
        self.remote_name = remote.name

    async def _call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        loop = asyncio.get_running_loop()

        async def report(progress: float, total: float | None, message: str | None) -> None:
            partial = ToolResult(
                message or (f"{progress:g}/{total:g}" if total else f"{progress:g}"),
                details={"progress": progress, "total": total, "message": message},
            )
            loop.call_soon_threadsafe(ctx.update, partial)

        try:
            result = await runtime.call(self.connection.call_tool(self.remote_name, args, report))
        except ServerFailure as failure:
            return ToolResult.error(str(failure), details=self._details(None, []))
        return to_tool_result(result, self.server, self.remote_name)

    def _details(self, structured: Any, resources: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "server": self.server,
            "tool": self.remote_name,
            "structured_content": structured,
            "resources": resources,
        }


def to_tool_result(result: types.CallToolResult, server: str, tool: str) -> ToolResult:
    """The :class:`ToolResult` for an MCP ``CallToolResult`` (see the module docs)."""
    content: list[TextContent | ImageContent] = []
    resources: list[dict[str, Any]] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            content.append(TextContent(text=block.text))
        elif isinstance(block, types.ImageContent):
            content.append(ImageContent(data=block.data, mime_type=block.mime_type))
            resources.append({"type": "image", "mime_type": block.mime_type})
        elif isinstance(block, types.AudioContent):
            size = _decoded_size(block.data)
            content.append(TextContent(text=f"[audio: {block.mime_type}, {size} bytes]"))
            resources.append({"type": "audio", "mime_type": block.mime_type, "bytes": size})
        elif isinstance(block, types.EmbeddedResource):
            content.append(_embedded(block.resource, resources))
        elif isinstance(block, types.ResourceLink):
            content.append(TextContent(text=f"[resource: {block.name} <{block.uri}>]"))
            resources.append({"type": "resource_link", "uri": str(block.uri), "name": block.name})
    structured = result.structured_content
    if not content and structured is not None:
        content.append(TextContent(text=json.dumps(structured, ensure_ascii=False, default=str)))
    details = {
        "server": server,
        "tool": tool,
        "structured_content": structured,
        "resources": resources,
    }
    return ToolResult(content, details=details, is_error=bool(result.is_error))


def _embedded(
    resource: types.TextResourceContents | types.BlobResourceContents,
    resources: list[dict[str, Any]],
) -> TextContent | ImageContent:
    uri, mime = str(resource.uri), resource.mime_type
    if isinstance(resource, types.TextResourceContents):
        resources.append({"type": "resource", "uri": uri, "mime_type": mime})
        return TextContent(text=f"[resource {uri}]\n{resource.text}")
    size = _decoded_size(resource.blob)
    resources.append({"type": "resource", "uri": uri, "mime_type": mime, "bytes": size})
    if mime and mime.startswith("image/"):
        return ImageContent(data=resource.blob, mime_type=mime)
    return TextContent(text=f"[resource {uri}: {mime or 'binary'}, {size} bytes]")


def _decoded_size(data: str) -> int:
    """The number of bytes the base64 text ``data`` stands for."""
    stripped = data.strip()
    return len(stripped) * 3 // 4 - (len(stripped) - len(stripped.rstrip("=")))
