"""One MCP server connection: start, list tools, call tools, crash, restart, stop.

A :class:`Connection` lives on the MCP runtime loop (:mod:`mainspring.mcp.runtime`) and is
shared by every agent of the process whose server settings are identical (the transport:
command, arguments, environment, directory, or URL and headers). Agents hold it through
:func:`acquire`/:func:`release`; when the last one releases it the server is stopped.

States: ``stopped`` (never started, or stopped by its last user), ``starting``,
``running``, ``failed`` (it crashed, exited while idle or never started: the next call
after the backoff starts it again; calls before then fail at once). A stdio server that
exits while idle is noticed at once (its output ends) and marked ``failed``; an HTTP
server that lost the session answers the next call with 404, and that call starts a new
session and is sent again (the server never ran it). A call the server dropped by
exiting is sent again once, after a restart, only if the tool is idempotent. A restart
that finds the tool list changed tells the listeners (the agents) as
``notifications/tools/list_changed`` does. HTTP 401 and 403 are said as such, naming
the server and the header that was sent. A server with ``auth = "oauth"`` is reached
through the SDK's OAuth client (:mod:`~mainspring.mcp.oauth`); the time a person takes
to authorize it does not count against ``startup_timeout_s``. A failure is described
with the tail of the server's stderr (kept as a bounded ring,
:mod:`~mainspring.mcp.stderr`). Tools the server lists but that cannot be used are left
out and kept in :attr:`Connection.skipped` with the reason
(:mod:`~mainspring.mcp.listing`). The process is owned by one task: it enters the SDK's
transport and session contexts, and leaves them (ending the process) on stop, on crash
or at interpreter exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from typing import Any

import mcp_types as types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.jsonrpc import JSONRPCNotification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

from ..logs import get_logger
from ..settings import McpServerSettings
from . import oauth, runtime
from .elicitation import Asker, asking, question_of, reply_to
from .launch import CommandNotFound, resolve_command
from .listing import ListingSieve
from .stderr import StderrRing
from .streams import tapped
from .text import escape_control

__all__ = ["Connection", "ServerFailure", "acquire", "connections", "release", "transport_key"]

_log = get_logger(__name__)

_STDERR_TAIL = 2_000
_BACKOFF_FIRST_S = 1.0
_BACKOFF_MAX_S = 30.0
_STOP_S = 5.0
_LOG_DATA = 4_000
_LIST_CHANGED = "notifications/tools/list_changed"
_EXTRAS_CHANGED = ("notifications/prompts/list_changed", "notifications/resources/list_changed")
_EXTRAS = 1_000  # resources or prompts kept per server
_LOG_LEVELS = {
    "debug": "debug",
    "info": "info",
    "notice": "info",
    "warning": "warning",
    "error": "error",
    "critical": "error",
    "alert": "error",
    "emergency": "error",
}


class ServerFailure(Exception):
    """The server could not be reached: it crashed, never started, or closed the session."""


def transport_key(settings: McpServerSettings) -> str:
    """What makes two servers the same process: the transport settings and what the client
    declares to it (sampling is declared only with a budget), as JSON."""
    fields = settings.model_dump(
        include={"command", "args", "env", "cwd", "url", "headers", "auth", "oauth_scopes"}
        | {"oauth_client_name", "redirect_port"}
    )
    fields["sampling"] = settings.sampling_budget > 0
    return json.dumps(fields, sort_keys=True)


class Connection:
    """A server shared by the agents whose settings give the same :func:`transport_key`."""

    def __init__(self, key: str, name: str, settings: McpServerSettings) -> None:
        self.key = key
        self.name = name
        self.settings = settings
        self._state = "stopped"
        self._state_changed: asyncio.Condition | None = None
        self.users = 0
        self.tools: tuple[types.Tool, ...] | None = None
        self.tools_version = 0
        self.skipped: dict[str, str] = {}
        self.resources: tuple[types.Resource, ...] = ()
        self.prompts: tuple[types.Prompt, ...] = ()
        self.instructions: str | None = None
        self.protocol_version: str | None = None
        self.error: str | None = None
        self.started_s: float | None = None
        self.listeners: set[Callable[[], None]] = set()
        self._session: ClientSession | None = None
        self._client: Client | None = None
        self._askers: dict[int, Asker] = {}
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._stderr: StderrRing | None = None
        self._sieve = ListingSieve()
        self._failures = 0
        self._retry_at = 0.0
        self._relist: asyncio.Task[None] | None = None
        self._relist_extras: asyncio.Task[None] | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._lost: asyncio.Event | None = None
        self._announcing: set[asyncio.Task[None]] = set()
        self._calls = 0
        self._http_status: int | None = None
        self._deadline: asyncio.Timeout | None = None

    @property
    def state(self) -> str:
        """``stopped``, ``starting``, ``running``, ``failing`` or ``failed``."""
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        self._state = value
        condition = self._state_changed
        if condition is not None:
            task = asyncio.get_running_loop().create_task(self._announce(condition))
            self._announcing.add(task)
            task.add_done_callback(self._announcing.discard)

    @staticmethod
    async def _announce(condition: asyncio.Condition) -> None:
        async with condition:
            condition.notify_all()

    async def wait_for_state(self, *states: str) -> str:
        """Return once the state is one of ``states`` (on the runtime loop)."""
        if self._state_changed is None:
            self._state_changed = asyncio.Condition()
        async with self._state_changed:
            await self._state_changed.wait_for(lambda: self._state in states)
        return self._state

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
        lost = self._lost = asyncio.Event()
        self._http_status = None
        known = self.tools_version
        try:
            async with AsyncExitStack() as stack:
                streams = await self._open(stack, stderr)
                async with asyncio.timeout(self.settings.startup_timeout_s) as deadline:
                    self._deadline = deadline
                    session = await self._handshake(stack, streams)
                    await self._list_tools(session)
                    await self._list_extras(session)
                self._deadline = None
                self._session = session
                self.state = "running"
                self._failures = 0
                self.started_s = time.perf_counter() - began
                ready.set_result(None)
                if known and self.tools_version != known:
                    self._notify()
                await _either(stop, lost)
                if not stop.is_set():
                    raise _SessionLost() if self.settings.url is not None else _Lost()
        except BaseException as error:
            # a stopped owner may end after the next start began: the connection's state
            # and session are then the new owner's, never touched here
            current = self._owner is asyncio.current_task()
            if current:
                self._session = self._client = None
                reason = (
                    oauth.describe(_first(error))
                    or self._http_refusal()
                    or _describe(error, self.settings.startup_timeout_s, ready.done(), self._calls)
                )
                if isinstance(error, asyncio.CancelledError) or stop.is_set():
                    self.state = "stopped"
                else:
                    self._failed(reason)
                    if isinstance(_first(error), _SessionLost):
                        self._reconnecting = asyncio.get_running_loop().create_task(
                            self._reconnect()
                        )
            if not ready.done():
                ready.set_result(None)
            if not isinstance(error, Exception | asyncio.CancelledError):
                raise
        finally:
            if self._owner is asyncio.current_task():
                self._session = self._client = None
                self._deadline = None
                if self.state == "running":
                    self.state = "stopped"

    async def _open(self, stack: AsyncExitStack, stderr: StderrRing) -> tuple[Any, Any]:
        """The transport's streams, tapped (the process started, or the HTTP client made)."""
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

            async def note_status(response: httpx2.Response) -> None:
                if response.status_code >= 400:
                    self._http_status = response.status_code

            auth = None
            if settings.auth == "oauth":
                auth = oauth.oauth_provider(self.name, settings, self._startup_paused)
            client = httpx2.AsyncClient(
                auth=auth,
                headers=settings.headers,
                timeout=httpx2.Timeout(30.0),
                event_hooks={"response": [note_status]},
            )
            await stack.enter_async_context(client)
            streams = await stack.enter_async_context(
                streamable_http_client(settings.url, http_client=client)
            )
        return tapped(streams[0], streams[1], self._sieve.sent, self._received, self._stream_ended)

    @contextlib.contextmanager
    def _startup_paused(self) -> Iterator[None]:
        """Hold the startup deadline while this block waits for a person (authorizing)."""
        deadline = self._deadline
        when = None if deadline is None else deadline.when()
        if deadline is None or when is None:
            yield
            return
        loop = asyncio.get_running_loop()
        left = when - loop.time()
        deadline.reschedule(None)
        try:
            yield
        finally:
            deadline.reschedule(loop.time() + max(0.0, left))

    async def _handshake(self, stack: AsyncExitStack, streams: tuple[Any, Any]) -> ClientSession:
        """The session, its protocol version negotiated by the SDK (``server/discover``,
        falling back to ``initialize`` for servers of an earlier protocol)."""
        client = Client(
            _Opened(streams),
            mode="auto",
            cache=None,
            message_handler=self._on_message,
            list_roots_callback=self._list_roots,
            elicitation_callback=self._on_elicit,
            sampling_callback=self._on_sample if self.settings.sampling_budget else None,
            logging_callback=self._on_log,
            log_level="info",
            client_info=types.Implementation(name="mainspring", version="0.1.0"),
        )
        await stack.enter_async_context(client)
        self._client = client
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            lost = self._lost
            assert lost is not None
            listening = asyncio.get_running_loop().create_task(self._listen(client, lost))
            stack.callback(listening.cancel)
        return client.session

    async def _list_roots(self, context: Any) -> types.ListRootsResult:
        """The roots the server may work in: ``roots``, else its ``cwd`` (or the process's)."""
        return types.ListRootsResult(roots=_roots(self.settings))

    async def _on_elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        """An elicitation, put to the person by the call that caused it (see
        :mod:`~mainspring.mcp.elicitation`); declined when that cannot be done."""
        question = question_of(self.name, params, self.settings.escape_control)
        asker = asking.get()
        if asker is None and len(set(self._askers.values())) == 1:
            asker = next(iter(self._askers.values()))
        if isinstance(question, str) or asker is None:
            why = question if isinstance(question, str) else "no single call in flight asked it"
            _log.warning("mcp_elicitation_declined", server=self.name, reason=why)
            return types.ElicitResult(action="decline")
        return reply_to(question, await asker.ask(question))

    async def _on_sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        """A sampling request, answered for the call that caused it (routed as an
        elicitation is; see :mod:`~mainspring.mcp.sampling`); refused when that cannot
        be done."""
        asker = asking.get()
        if asker is None and len(set(self._askers.values())) == 1:
            asker = next(iter(self._askers.values()))
        if asker is None:
            _log.warning("mcp_sampling_refused", server=self.name, reason="no single call")
            return types.ErrorData(
                code=types.INVALID_REQUEST, message="sampling refused: no single call asked it"
            )
        return await asker.sample(params)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A server log message, as a structured log record naming the server."""
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        level = _LOG_LEVELS.get(params.level, "info")
        getattr(_log, level)(
            "mcp_server_log",
            server=self.name,
            level=params.level,
            logger=params.logger,
            data=escape_control(data[:_LOG_DATA]),
        )

    async def _list_extras(self, session: ClientSession) -> None:
        """Resources and prompts, when the server offers them (a failure only logged)."""
        capabilities = session.server_capabilities
        self.instructions = session.instructions
        self.protocol_version = session.protocol_version
        resources: list[types.Resource] = []
        prompts: list[types.Prompt] = []
        try:
            if capabilities is not None and capabilities.resources is not None:
                resources = (await session.list_resources()).resources[:_EXTRAS]
            if capabilities is not None and capabilities.prompts is not None:
                prompts = (await session.list_prompts()).prompts[:_EXTRAS]
        except (MCPError, ValueError) as error:
            _log.warning("mcp_list_extras_failed", server=self.name, error=str(error))
        self.resources, self.prompts = tuple(resources), tuple(prompts)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read the resource ``uri``; :class:`ServerFailure` if the server is not there."""
        session = await self.ensure_started()
        try:
            return await session.read_resource(uri)
        except MCPError as error:
            if error.error.code == types.CONNECTION_CLOSED:
                await self._crashed(self._dropped_call())
                raise ServerFailure(self.error) from None
            raise

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        """The prompt ``name`` filled with ``arguments``; :class:`ServerFailure` if the
        server is not there (an ``MCPError`` of the server is raised as it is)."""
        await self.ensure_started()
        client = self._client
        assert client is not None
        try:
            return await client.get_prompt(name, arguments)
        except MCPError as error:
            if error.error.code == types.CONNECTION_CLOSED:
                await self._crashed(self._dropped_call())
                raise ServerFailure(self.error) from None
            raise

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

    def _received(self, item: Any) -> Any:
        """Every incoming message, in order, before the SDK handles it: a tool, prompt or
        resource list change starts the re-listing at once, so a call whose result
        follows it waits for it."""
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCNotification):
            if message.method == _LIST_CHANGED:
                self._relist = asyncio.get_running_loop().create_task(self._refresh())
            elif message.method in _EXTRAS_CHANGED:
                self._relist_extras = asyncio.get_running_loop().create_task(self._refresh_extras())
        return self._sieve.received(item)

    async def _listen(self, client: Client, lost: asyncio.Event) -> None:
        """Keep a ``subscriptions/listen`` stream open (2026-07-28), so the server sends
        tool, prompt and resource list changes; tool changes are acted on as they arrive
        (:meth:`_received`), the others re-list the prompts and resources.

        Over HTTP, a stream that ends once it was open means the session is gone (the
        server restarted or went away): ``lost`` is set, the connection is marked
        failed and started again while agents use it (:meth:`_reconnect`), so the new
        session listens again and a changed tool list reaches them.
        """
        listening = False
        try:
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as subscription:
                listening = True
                async for _ in subscription:
                    pass  # acted on as they arrive (_received)
        except (MCPError, RuntimeError, TimeoutError) as error:
            _log.debug("mcp_listen_ended", server=self.name, error=str(error))
        if listening and self.settings.url is not None:
            lost.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
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
            self._notify()

    async def _refresh_extras(self) -> None:
        """List the resources and prompts again (a failure only logged)."""
        session = self._session
        if session is None:
            return
        try:
            await self._list_extras(session)
        except Exception as error:  # the session closed under it: the next start lists them
            _log.warning("mcp_list_extras_failed", server=self.name, error=str(error))

    def _notify(self) -> None:
        for listener in list(self.listeners):
            try:
                listener()
            except Exception as error:  # one agent's refresh never stops the others'
                _log.warning("mcp_tool_refresh_failed", server=self.name, error=str(error))

    def _stream_ended(self) -> None:
        if self._lost is not None:
            self._lost.set()

    def _dropped_call(self) -> str:
        if self.settings.command is not None:
            return "exited or closed its output during the call"
        return "closed the connection during the call"

    def _http_refusal(self) -> str | None:
        """The sentence for an HTTP 401/403 the server answered last, or ``None``."""
        status = self._http_status
        if status not in (401, 403):
            return None
        what = "401 Unauthorized" if status == 401 else "403 Forbidden"
        if self.settings.auth == "oauth":
            again = f"authorize it again: `mainspring mcp login {self.name}`"
            return f"was refused by the server: HTTP {what} ({again})"
        sent = ", ".join(sorted(self.settings.headers))
        headers = f"the header {sent} was sent" if sent else "no header was sent"
        return f"was refused by the server: HTTP {what} ({headers}; check its token)"

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

    async def _reconnect(self) -> None:
        """Start a lost HTTP session again while agents use the connection, waiting the
        backoff (1 s doubling up to 30 s) between attempts. A call need not wait for
        it: an attempt that fails here leaves the next call free to try at once."""
        delay = 0.0
        while self.users > 0 and self.state == "failed":
            await asyncio.sleep(delay)
            if self.users == 0 or self.state != "failed":
                return
            try:
                await self.ensure_started()
            except ServerFailure:
                self._retry_at = time.monotonic()
                delay = min(_BACKOFF_MAX_S, max(_BACKOFF_FIRST_S, delay * 2))
                continue
            _log.info("mcp_session_renewed", server=self.name)
            return

    def stderr_tail(self) -> str:
        """The last couple of thousand characters the server wrote to stderr."""
        return "" if self._stderr is None else self._stderr.tail(_STDERR_TAIL)

    async def stop(self) -> None:
        """End the session and the process; returns once they are gone (a few seconds max).

        Only what was running when it was called is stopped: a start that begins while it
        waits (a new user of the shared server) keeps its own process and stderr.
        """
        owner, stop, stderr = self._owner, self._stop, self._stderr
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        if owner is None or owner.done():
            self.state = "stopped" if self.state != "failed" else self.state
            if stderr is not None:
                stderr.close()
            return
        self.state = "stopped"
        if stop is not None:
            stop.set()
        done, _ = await asyncio.wait([owner], timeout=_STOP_S)
        if not done:
            owner.cancel()
            await asyncio.wait([owner], timeout=_STOP_S)
        if stderr is not None:
            stderr.close()

    async def _crashed(self, reason: str) -> None:
        """The session broke under a call: let the owner unwind, then describe the failure."""
        if self.state in ("failed", "failing"):
            if self._owner is not None:
                await asyncio.wait([self._owner], timeout=_STOP_S)
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
        self,
        name: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None,
        idempotent: bool = False,
        asker: Asker | None = None,
    ) -> types.CallToolResult:
        """Call the tool ``name``; :class:`ServerFailure` if the server is not there for it.

        A call the server never ran (an HTTP session gone) is sent again on a new one; a
        call it dropped by exiting is sent again once, after a restart, if ``idempotent``.
        Cancelling this coroutine cancels the request: the SDK sends the server
        ``notifications/cancelled``. ``asker`` is how the call puts the server's
        elicitations to the person (:mod:`~mainspring.mcp.elicitation`).
        """
        if asker is not None:
            asking.set(asker)
            self._askers[id(asker)] = asker
        try:
            return await self._call_tool(name, arguments, progress, idempotent)
        finally:
            if asker is not None:
                self._askers.pop(id(asker), None)

    async def _call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        progress: ProgressFnT | None,
        idempotent: bool,
    ) -> types.CallToolResult:
        for attempt in (1, 2):
            await self.ensure_started()
            client = self._client
            assert client is not None
            self._http_status = None
            self._calls += 1
            try:
                # the client resolves a 2026-07-28 InputRequiredResult (an elicitation
                # travelling with the call) and sends the call again with the answer
                result = await client.call_tool(name, arguments, progress_callback=progress)
                break
            except MCPError as error:
                refusal = self._http_refusal()
                if refusal is not None:
                    raise ServerFailure(f'MCP server "{self.name}" {refusal}') from None
                never_ran = self._http_status == 404 and self.settings.url is not None
                if error.error.code != types.CONNECTION_CLOSED and not never_ran:
                    raise
                if never_ran:
                    await self._crashed("lost its HTTP session (404)")
                else:
                    await self._crashed(self._dropped_call())
                if attempt == 2 or not (never_ran or idempotent):
                    raise ServerFailure(self.error) from None
                _log.info("mcp_call_retried", server=self.name, tool=name)
            finally:
                self._calls -= 1
        for relist in (self._relist, self._relist_extras):
            if relist is not None and not relist.done():
                # the server changed its lists during the call: known before the result
                await asyncio.shield(relist)
        if not isinstance(result, types.CallToolResult):
            raise ServerFailure(f"unexpected reply to tools/call: {type(result).__name__}")
        return result


def _roots(settings: McpServerSettings) -> list[types.Root]:
    paths = settings.roots if settings.roots is not None else (settings.cwd or os.getcwd(),)
    return [
        types.Root(uri=pathlib.Path(os.path.abspath(path)).as_uri(), name=path)  # type: ignore[arg-type]
        for path in paths
    ]


class _Opened:
    """Streams already open, as the SDK's ``Client`` takes a transport."""

    def __init__(self, streams: tuple[Any, Any]) -> None:
        self._streams = streams

    async def __aenter__(self) -> tuple[Any, Any]:
        return self._streams

    async def __aexit__(self, *exc_info: object) -> None:
        return None


class _Lost(Exception):
    """The server's stream ended without anyone stopping it."""


class _SessionLost(Exception):
    """An HTTP server's subscription stream ended without anyone stopping it."""


async def _either(first: asyncio.Event, second: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _first(error: BaseException) -> BaseException:
    """``error``, or the first error of an exception group (and of its groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _describe(error: BaseException, startup_timeout_s: float, started: bool, calls: int) -> str:
    if isinstance(error, CommandNotFound):
        return f"cannot start: {error}"
    if isinstance(error, _Lost):
        return "exited while idle" if not calls else "exited during a call"
    if isinstance(error, _SessionLost):
        return "lost its HTTP session while idle (its stream ended)"
    if isinstance(error, TimeoutError) and not started:
        return f"did not answer initialize within {startup_timeout_s} s"
    if isinstance(error, BaseExceptionGroup):
        first = error.exceptions[0]
        return _describe(first, startup_timeout_s, started, calls)
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
