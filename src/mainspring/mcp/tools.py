"""MCP tools as mainspring tools, and MCP tool results as :class:`~mainspring.ToolResult`.

A server tool ``t`` becomes an :class:`McpTool` named ``t`` (or ``PREFIX_t`` with a
``tool_prefix``; characters a model API refuses in names become ``_``). Its parameters
are the server's input schema, so the kernel validates the model's arguments against it
before any gate runs, matching ``pattern`` and ``patternProperties`` with RE2 (linear
time, whatever the server wrote). Its description is the server's, with control
characters escaped (``escape_control``), and ``timeout_s`` is the server's. The tool's
MCP annotations are kept (:attr:`McpTool.annotations`) and read by
:func:`mainspring.effects.from_mcp_annotations`: they give the tool its effects, and
``idempotentHint`` (or ``readOnlyHint``) makes it :attr:`~mainspring.Tool.idempotent`.

Results: text blocks stay text; images stay images; an embedded text resource becomes a
text block headed by its URI, an embedded image blob an image, any other blob, audio or
resource link a one-line text description. ``is_error`` is the server's ``isError``.
``details`` is ``{"server", "tool", "structured_content", "resources"}``: the structured
result (``structuredContent``) and the URIs, MIME types and sizes of the non-text
blocks. A result with no content but a structured part shows the model that part as
JSON. A result keeps at most ``max_content_blocks`` blocks and ``max_content_bytes``
bytes of content; past either, one text block says what was left out. Progress
notifications reach ``ctx.update`` at most once per :data:`PROGRESS_INTERVAL_S` per
call (the latest one wins).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from typing import Any

import mcp_types as types

from ..effects import from_mcp_annotations
from ..json_schema import schema_problems
from ..messages import ImageContent, TextContent
from ..settings import McpServerSettings
from ..tools import Tool, ToolArgumentsError, ToolContext, ToolResult
from . import runtime
from .connection import Connection, ServerFailure
from .elicitation import Asker
from .sampling import Sampler
from .text import escape_control

__all__ = [
    "PROGRESS_INTERVAL_S",
    "McpTool",
    "escape_control",
    "to_tool_result",
    "tool_name",
]

PROGRESS_INTERVAL_S = 0.05
"""The least time between two progress updates of one call."""

_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(prefix: str | None, name: str) -> str:
    """The mainspring name of the server tool ``name``."""
    full = f"{prefix}_{name}" if prefix else name
    return _NAME_OK.sub("_", full)[:64]


class McpTool(Tool):
    """A tool served by an MCP server: ``server`` names it, ``remote_name`` is its name there.

    ``owner`` is ``"mcp"``: a tool that appears when the server's list changes is owned
    by the ``mcp`` plugin like the ones the agent was built with (``agent.tool_owners``).
    """

    __slots__ = (
        "annotations",
        "connection",
        "owner",
        "remote_name",
        "sampler",
        "server",
        "settings",
    )

    def __init__(
        self, server: str, settings: McpServerSettings, connection: Connection, remote: types.Tool
    ) -> None:
        schema = dict(remote.input_schema) if remote.input_schema else {}
        schema.setdefault("type", "object")
        annotations = (
            remote.annotations.model_dump(by_alias=True, exclude_none=True)
            if remote.annotations
            else {}
        )
        effects, idempotent = from_mcp_annotations(annotations)
        clean = escape_control if settings.escape_control else str
        title = remote.title or annotations.get("title") or remote.name
        super().__init__(
            name=tool_name(settings.tool_prefix, remote.name),
            description=clean(remote.description or title),
            parameters=schema,
            execute=self._call,
            timeout_s=settings.timeout_s,
            label=clean(f"{server}: {title}"),
            idempotent=idempotent,
            effects=effects,
        )
        from ..json_schema import check_schema

        check_schema(schema, linear_regex=True)
        self.server = server
        self.owner = "mcp"  # the plugin that gives it, also when it arrives after a refresh
        self.settings = settings
        self.connection = connection
        self.remote_name = remote.name
        self.annotations: dict[str, Any] = annotations
        self.sampler: Sampler | None = None
        """The agent's sampling for this server (``sampling_budget``), set by the binding."""

    @property
    def rename_hint(self) -> str:
        """How to give this tool another name, for the error when another tool has its name."""
        given = f'the MCP server "{self.server}" gives it (its tool "{self.remote_name}")'
        prefix = self.settings.tool_prefix
        if prefix:
            return f'{given}; set another tool_prefix on that server (now "{prefix}")'
        renamed = tool_name(self.server, self.remote_name)
        return (
            f"{given}; set tool_prefix on that server "
            f'(tool_prefix = "{self.server}" names it {renamed})'
        )

    def validate(self, arguments: dict[str, Any]) -> Any:
        """Check the model's arguments against the server's schema (patterns by RE2)."""
        assert isinstance(self.parameters, dict)
        problems = schema_problems(self.parameters, arguments, linear_regex=True)
        if problems:
            raise ToolArgumentsError(self.name, problems, arguments)
        return arguments

    async def _call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        loop = asyncio.get_running_loop()
        progress = _Progress(loop, ctx, self.settings.escape_control)
        asker = Asker(loop, ctx, self.sampler)
        try:
            result = await runtime.call(
                self.connection.call_tool(
                    self.remote_name, args, progress.report, self.idempotent, asker
                )
            )
        except ServerFailure as failure:
            return ToolResult.error(str(failure), details=self._details(None, []))
        finally:
            asker.close()
        progress.finish()
        return to_tool_result(result, self.server, self.remote_name, self.settings)

    def _details(self, structured: Any, resources: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "server": self.server,
            "tool": self.remote_name,
            "structured_content": structured,
            "resources": resources,
        }


class _Progress:
    """A call's progress callback (on the runtime loop): the latest report, passed on to
    ``ctx.update`` on the agent's loop at most once per :data:`PROGRESS_INTERVAL_S`; the
    last one held back is passed on by :meth:`finish` (on the agent's loop)."""

    __slots__ = ("_ctx", "_done", "_escape", "_last", "_latest", "_loop", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop, ctx: ToolContext, escape: bool) -> None:
        self._loop, self._ctx, self._escape = loop, ctx, escape
        self._latest: tuple[float, float | None, str | None] = (0.0, None, None)
        self._last = float("-inf")
        self._scheduled = False
        self._done = False

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        self._latest = (progress, total, message)
        if self._scheduled:
            return
        self._scheduled = True
        wait = self._last + PROGRESS_INTERVAL_S - time.monotonic()
        if wait > 0:
            asyncio.get_running_loop().call_later(wait, self._flush)
        else:
            self._flush()

    def _flush(self) -> None:
        if self._done:
            return
        self._scheduled = False
        self._last = time.monotonic()
        with contextlib.suppress(RuntimeError):  # the agent's loop closed: nobody listens
            self._loop.call_soon_threadsafe(self._ctx.update, self._partial())

    def finish(self) -> None:
        """The call is over: pass on the report still held back, if any."""
        self._done = True
        if self._scheduled:
            self._ctx.update(self._partial())

    def _partial(self) -> ToolResult:
        progress, total, message = self._latest
        if message is not None and self._escape:
            message = escape_control(message)
        return ToolResult(
            message or (f"{progress:g}/{total:g}" if total else f"{progress:g}"),
            details={"progress": progress, "total": total, "message": message},
        )


_DEFAULT_SETTINGS = McpServerSettings(command="-")


def to_tool_result(
    result: types.CallToolResult,
    server: str,
    tool: str,
    settings: McpServerSettings = _DEFAULT_SETTINGS,
) -> ToolResult:
    """The :class:`ToolResult` for an MCP ``CallToolResult`` (see the module docs).

    ``settings`` gives the content limits and whether control characters are escaped.
    """
    content: list[TextContent | ImageContent] = []
    resources: list[dict[str, Any]] = []
    clean = escape_control if settings.escape_control else str
    budget = settings.max_content_bytes
    shown = 0
    for block in result.content:
        if shown == settings.max_content_blocks:
            break
        mapped = _block(block, resources, clean)
        if mapped is None:
            shown += 1
            continue
        size = len(mapped.data if isinstance(mapped, ImageContent) else mapped.text.encode())
        if size > budget:
            if isinstance(mapped, TextContent) and budget > 0:
                cut = mapped.text.encode()[:budget].decode(errors="ignore")
                content.append(TextContent(text=cut))
            budget = 0
            break
        budget -= size
        content.append(mapped)
        shown += 1
    left = len(result.content) - shown
    if left > 0:
        content.append(
            TextContent(
                text=f"[{left} content block(s) left out or cut short: a result keeps at most "
                f"{settings.max_content_blocks} blocks and {settings.max_content_bytes} bytes]"
            )
        )
    structured = result.structured_content
    if not content and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, default=str)
        if len(text) > settings.max_content_bytes:
            text = text[: settings.max_content_bytes] + " [structured content cut short]"
        content.append(TextContent(text=clean(text)))
    details = {
        "server": server,
        "tool": tool,
        "structured_content": structured,
        "resources": resources,
    }
    return ToolResult(content, details=details, is_error=bool(result.is_error))


def _block(
    block: Any, resources: list[dict[str, Any]], clean: Any
) -> TextContent | ImageContent | None:
    """The mainspring block for one MCP content block (``None`` for an unknown kind)."""
    if isinstance(block, types.TextContent):
        return TextContent(text=clean(block.text))
    if isinstance(block, types.ImageContent):
        resources.append({"type": "image", "mime_type": block.mime_type})
        return ImageContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, types.AudioContent):
        size = _decoded_size(block.data)
        resources.append({"type": "audio", "mime_type": block.mime_type, "bytes": size})
        return TextContent(text=clean(f"[audio: {block.mime_type}, {size} bytes]"))
    if isinstance(block, types.EmbeddedResource):
        return _embedded(block.resource, resources, clean)
    if isinstance(block, types.ResourceLink):
        resources.append({"type": "resource_link", "uri": str(block.uri), "name": block.name})
        return TextContent(text=clean(f"[resource: {block.name} <{block.uri}>]"))
    return None


def _embedded(
    resource: types.TextResourceContents | types.BlobResourceContents,
    resources: list[dict[str, Any]],
    clean: Any,
) -> TextContent | ImageContent:
    uri, mime = str(resource.uri), resource.mime_type
    if isinstance(resource, types.TextResourceContents):
        resources.append({"type": "resource", "uri": uri, "mime_type": mime})
        return TextContent(text=clean(f"[resource {uri}]\n{resource.text}"))
    size = _decoded_size(resource.blob)
    resources.append({"type": "resource", "uri": uri, "mime_type": mime, "bytes": size})
    if mime and mime.startswith("image/"):
        return ImageContent(data=resource.blob, mime_type=mime)
    return TextContent(text=clean(f"[resource {uri}: {mime or 'binary'}, {size} bytes]"))


def _decoded_size(data: str) -> int:
    """The number of bytes the base64 text ``data`` stands for."""
    stripped = data.strip()
    return len(stripped) * 3 // 4 - (len(stripped) - len(stripped.rstrip("=")))


RESOURCE_TOOL = "read_resource"
"""The name (after the server's name) of the tool that reads a server's resources; it is
offered when the server lists resources, and ``include``/``exclude`` choose it by this name."""


class McpResourceTool(Tool):
    """``SERVER_read_resource``: read one of the server's resources by URI (read-only)."""

    __slots__ = ("annotations", "connection", "owner", "remote_name", "server", "settings")

    def __init__(self, server: str, settings: McpServerSettings, connection: Connection) -> None:
        clean = escape_control if settings.escape_control else str
        known = "; ".join(
            f"{resource.uri} ({resource.name})" for resource in connection.resources[:20]
        )
        super().__init__(
            name=tool_name(None, f"{server}_{RESOURCE_TOOL}"),
            description=clean(
                f'Read a resource of the MCP server "{server}" by its URI. Resources: {known}'
            ),
            parameters={
                "type": "object",
                "properties": {"uri": {"type": "string", "description": "The resource URI."}},
                "required": ["uri"],
                "additionalProperties": False,
            },
            execute=self._read,
            timeout_s=settings.timeout_s,
            label=clean(f"{server}: read resource"),
            idempotent=True,
            effects=("read",),
            roles={"uri": "url"},
        )
        self.server = server
        self.owner = "mcp"
        self.settings = settings
        self.connection = connection
        self.remote_name = RESOURCE_TOOL
        self.annotations: dict[str, Any] = {"readOnlyHint": True, "openWorldHint": False}

    async def _read(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            read = await runtime.call(self.connection.read_resource(args["uri"]))
        except ServerFailure as failure:
            return ToolResult.error(str(failure))
        blocks = [types.EmbeddedResource(resource=content) for content in read.contents]
        result = types.CallToolResult(content=list(blocks))
        return to_tool_result(result, self.server, RESOURCE_TOOL, self.settings)
