"""One MCP server connection: start, list tools, call tools, crash, restart, stop.

A :class:`Connection` lives on the MCP runtime loop (:mod:`mainspring.mcp.runtime`) and is
shared by every agent of the process whose server settings are identical (the transport:
command, arguments, environment, directory, or URL and headers). Agents hold it through
:func:`acquire`/:func:`release`; when the last one releases it the server is stopped.

States: ``stopped`` (never started, or stopped by its last user), ``starting``,
``running``, ``failed`` (it crashed or never started: the next call after the backoff
starts it again; calls before then fail at once). A failure is described with the tail of
the server's stderr (kept as a bounded ring, :mod:`~mainspring.mcp.stderr`). Tools the
server lists but that cannot be used are left out and kept in :attr:`Connection.skipped`
with the reason (:mod:`~mainspring.mcp.listing`). The process is owned by one task: it
enters the SDK's transport and session contexts, and leaves them (ending the process) on
stop, on crash or at interpreter exit.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

from ..logs import get_logger
from ..settings import McpServerSettings
from . import runtime
from .launch import CommandNotFound, resolve_command
from .listing import ListingSieve
from .stderr import StderrRing

__all__ = ["Connection", "ServerFailure", "acquire", "connections", "release", "transport_key"]

_log = get_logger(__name__)

_STDERR_TAIL = 2_000
_BACKOFF_FIRST_S = 1.0
_BACKOFF_MAX_S = 30.0
_STOP_S = 5.0


class ServerFailure(Exception):
    """The server could not be reached: it crashed, never started, or closed the session."""


def transport_key(settings: McpServerSettings) -> str:
    """What makes two servers the same process: the transport settings, as JSON."""
    fields = settings.model_dump(include={"command", "args", "env", "cwd", "url", "headers"})
    return json.dumps(fields, sort_keys=True)


class Connection:
    """A server shared by the agents whose settings give the same :func:`transport_key`."""

    def __init__(self, key: str, name: str, settings: McpServerSettings) -> None:
        self.key = key
        self.name = name
        self.settings = settings
        self.state = "stopped"
        self.users = 0
        self.tools: tuple[types.Tool, ...] | None = None
        self.tools_version = 0
        self.skipped: dict[str, str] = {}
        self.error: str | None = None
        self.started_s: float | None = None
        self.listeners: set[Callable[[], None]] = set()
        self._session: ClientSession | None = None
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._stderr: StderrRing | None = None
        self._sieve = ListingSieve()
        self._failures = 0
        self._retry_at = 0.0
        self._relist: asyncio.Task[None] | None = None

    # -- lifecycle (runtime loop) ---------------------------------------------------------

    async def ensure_started(self) -> ClientSession:
        """The live session, starting the server if needed; :class:`ServerFailure` if not."""
        if self.state == "running" and self._session is not None:
            return self._session
        if self._ready is None or self._ready.done():
            if self.state == "failed" and time.monotonic() < self._retry_at:
                wait = self._retry_at - time.monotonic()
                raise ServerFailure(f"{self.error} (next start attempt in {wait:.1f} s)")
            self._start()
        assert self._ready is not None
        await asyncio.shield(self._ready)
        if self._session is None:
            raise ServerFailure(self.error or "the server stopped")
        return self._session

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self.state = "starting"
        self.error = None
        self._ready = loop.create_future()
        self._stop = asyncio.Event()
        self._owner = loop.create_task(self._own(self._ready, self._stop), name=f"mcp-{self.name}")

    async def _own(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        began = time.perf_counter()
        if self._stderr is not None:
            self._stderr.close()
        stderr = self._stderr = StderrRing()
        try:
            async with AsyncExitStack() as stack:
                session = await self._open(stack, stderr)
                with anyio.fail_after(self.settings.startup_timeout_s):
                    await session.initialize()
                    await self._list_tools(session)
                self._session = session
                self.state = "running"
                self._failures = 0
                self.started_s = time.perf_counter() - began
                ready.set_result(None)
                await stop.wait()
        except BaseException as error:
            self._session = None
            reason = _describe(error, self.settings.startup_timeout_s, ready.done())
            if isinstance(error, asyncio.CancelledError) or stop.is_set():
                self.state = "stopped"
            else:
                self._failed(reason)
            if not ready.done():
                ready.set_result(None)
            if not isinstance(error, Exception | asyncio.CancelledError):
                raise
        finally:
            self._session = None
            if self.state == "running":
                self.state = "stopped"

    async def _open(self, stack: AsyncExitStack, stderr: StderrRing) -> ClientSession:
        settings = self.settings
        if settings.command is not None:
            params = StdioServerParameters(
                command=resolve_command(settings),
                args=list(settings.args),
                env=dict(settings.env) or None,
                cwd=settings.cwd,
            )
            assert stderr.writer is not None
            streams = await stack.enter_async_context(stdio_client(params, errlog=stderr.writer))
        else:
            import httpx2

            assert settings.url is not None
            client = httpx2.AsyncClient(headers=settings.headers, timeout=httpx2.Timeout(30.0))
            await stack.enter_async_context(client)
            streams = await stack.enter_async_context(
                streamable_http_client(settings.url, http_client=client)
            )
        read, write = self._sieve.wrap(streams[0], streams[1])
        session = ClientSession(
            read,
            write,
            message_handler=self._on_message,
            client_info=types.Implementation(name="mainspring", version="0.1.0"),
        )
        return await stack.enter_async_context(session)

    async def _list_tools(self, session: ClientSession) -> None:
        found: list[types.Tool] = []
        cursor: str | None = None
        self._sieve.skipped = {}
        self._sieve.version = session.protocol_version
        for _ in range(100):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            found.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        for tool, reason in self._sieve.skipped.items():
            if self.skipped.get(tool) != reason:
                _log.warning("mcp_tool_skipped", server=self.name, tool=tool, reason=reason)
        self.skipped = dict(self._sieve.skipped)
        if self.tools is None or [t.model_dump() for t in found] != [
            t.model_dump() for t in self.tools
        ]:
            self.tools = tuple(found)
            self.tools_version += 1

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist = asyncio.get_running_loop().create_task(self._refresh())
        elif isinstance(message, Exception):
            _log.debug("mcp_transport_error", server=self.name, error=str(message))

    async def _refresh(self) -> None:
        """List the tools again and tell the listeners (the agents) if they changed."""
        session = self._session
        if session is None:
            return
        version = self.tools_version
        try:
            await self._list_tools(session)
        except Exception as error:
            _log.warning("mcp_list_tools_failed", server=self.name, error=str(error))
        if self.tools_version != version:
            for listener in list(self.listeners):
                listener()

    def _failed(self, reason: str) -> None:
        self.state = "failed"
        self._failures += 1
        # the first failure is retried by the next call; repeated ones wait longer each time
        delay = 0.0 if self._failures == 1 else _BACKOFF_FIRST_S * 2 ** (self._failures - 2)
        delay = min(_BACKOFF_MAX_S, delay)
        self._retry_at = time.monotonic() + delay
        tail = self.stderr_tail()
        self.error = f'MCP server "{self.name}" {reason}' + (
            f"; its stderr ends with:\n{tail}" if tail else ""
        )
        _log.warning("mcp_server_failed", server=self.name, reason=reason)

    def stderr_tail(self) -> str:
        """The last couple of thousand characters the server wrote to stderr."""
        return "" if self._stderr is None else self._stderr.tail(_STDERR_TAIL)

    async def stop(self) -> None:
        """End the session and the process; returns once they are gone (a few seconds max)."""
        owner, stop = self._owner, self._stop
        if owner is None or owner.done():
            self.state = "stopped" if self.state != "failed" else self.state
            if self._stderr is not None:
                self._stderr.close()
            return
        self.state = "stopped"
        if stop is not None:
            stop.set()
        done, _ = await asyncio.wait([owner], timeout=_STOP_S)
        if not done:
            owner.cancel()
            await asyncio.wait([owner], timeout=_STOP_S)
        if self._stderr is not None:
            self._stderr.close()

    async def _crashed(self, reason: str) -> None:
        """The session broke under a call: let the owner unwind, then describe the failure."""
        if self.state == "failed":
            return
        self.state = "failing"
        owner, stop = self._owner, self._stop
        if stop is not None:
            stop.set()
        if owner is not None:
            await asyncio.wait([owner], timeout=_STOP_S)
        self._failed(reason)

    # -- calls (runtime loop) -------------------------------------------------------------

    async def call_tool(
        self, name: str, arguments: dict[str, Any], progress: ProgressFnT | None
    ) -> types.CallToolResult:
        """Call the tool ``name``; :class:`ServerFailure` if the server is not there for it.

        Cancelling this coroutine cancels the request: the SDK sends the server
        ``notifications/cancelled``.
        """
        session = await self.ensure_started()
        try:
            result = await session.call_tool(name, arguments, progress_callback=progress)
        except MCPError as error:
            if error.error.code == types.CONNECTION_CLOSED:
                await self._crashed("exited or closed the connection during the call")
                raise ServerFailure(self.error) from None
            raise
        relist = self._relist
        if relist is not None and not relist.done():
            # the server changed its tools during the call: agents learn it before the result
            await asyncio.shield(relist)
        if not isinstance(result, types.CallToolResult):
            raise ServerFailure(f"unexpected reply to tools/call: {type(result).__name__}")
        return result


def _describe(error: BaseException, startup_timeout_s: float, started: bool) -> str:
    if isinstance(error, CommandNotFound):
        return f"cannot start: {error}"
    if isinstance(error, TimeoutError) and not started:
        return f"did not answer initialize within {startup_timeout_s} s"
    if isinstance(error, BaseExceptionGroup):
        first = error.exceptions[0]
        return _describe(first, startup_timeout_s, started)
    what = "failed to start" if not started else "stopped"
    return f"{what}: {type(error).__name__}: {error}"


_connections: dict[str, Connection] = {}


def connections() -> list[Connection]:
    """Every connection of the process (for ``mainspring mcp``)."""
    return list(_connections.values())


async def acquire(name: str, settings: McpServerSettings) -> Connection:
    """The shared connection for ``settings``, with one more user."""
    key = transport_key(settings)
    connection = _connections.get(key)
    if connection is None:
        connection = _connections[key] = Connection(key, name, settings)
    elif connection.users == 0:
        # nobody holds it: the newest settings (deadlines, startup) apply from now on
        connection.name, connection.settings = name, settings
    connection.users += 1
    return connection


async def release(connection: Connection) -> None:
    """One user fewer; the last one stops the server (its tool list is remembered)."""
    connection.users = max(0, connection.users - 1)
    if connection.users == 0:
        await connection.stop()


async def _stop_all() -> None:
    await asyncio.gather(*(c.stop() for c in list(_connections.values())), return_exceptions=True)


runtime.on_shutdown(_stop_all)
