"""Which MCP servers an agent uses, and the agent's hold on their connections.

Servers come from ``agent.settings.mcp.servers`` (the config file's
``[mcp.servers.NAME]`` tables, or :class:`~mainspring.settings.Settings` built in code),
from the JSON files of ``agent.settings.mcp.server_files`` (Claude Desktop's
``mcpServers`` format) and from plugins: any registered plugin (an installed
distribution's entry-point module included) may declare servers with a module or object
attribute ``mcp_servers``, a mapping (or a function of no arguments returning one) of
server names to the same tables (:class:`~mainspring.settings.McpServerSettings` or
dicts). A server named in the settings replaces one of a file, which replaces a plugin's
server of the same name; disabled servers are left out;
``${VAR}`` in ``url``, ``headers`` and ``env`` is expanded (:mod:`~mainspring.mcp.launch`).

:func:`bind` runs in the agent's constructor: it takes a hold on each server's shared
connection, learns the tools (starting, all at once, the servers whose tool list is not
known yet in this process, or every one with ``startup="eager"``), and releases the hold
when the agent is closed (:meth:`~mainspring.Agent.aclose`) or garbage-collected.

Nothing fails all at once. A server that cannot start stops the agent only when it is
``required``; otherwise it is reported (a ``mcp_server_unavailable`` warning, and its
state and reason in :func:`report`) and its tools are absent. A tool that cannot be used
(its schema, its name) is left out and reported the same way; of two servers offering
one tool name, the one configured first keeps it and the other's is left out, naming
both servers and the ``tool_prefix`` that would separate them.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..contract.errors import PluginLoadError
from ..logs import get_logger
from ..plugins.mcp import servers_from_json
from ..settings import McpServerSettings
from ..tools import Tool
from . import runtime
from .connection import Connection, ServerFailure, acquire, release
from .launch import expand_variables
from .sampling import Sampler
from .tools import RESOURCE_TOOL, McpResourceTool, McpTool

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["bind", "configured_servers", "report"]

_log = get_logger(__name__)
_BIND_SLACK_S = 10.0


def configured_servers(agent: Agent) -> dict[str, McpServerSettings]:
    """The enabled servers ``agent`` uses, by name (see the module docs)."""
    found: dict[str, McpServerSettings] = {}
    for info in agent.plugins.infos:
        declared = getattr(info.plugin, "mcp_servers", None)
        if callable(declared):
            declared = declared()
        if declared is None:
            continue
        if info.granted is not None and "tools" not in info.granted:
            # servers are tools: a plugin not granted `tools` contributes none this way
            _log.warning(
                "mcp_servers_not_granted",
                plugin=info.name,
                detail="it declares mcp_servers but is not granted the 'tools' capability; "
                "its servers are not started",
            )
            continue
        if not isinstance(declared, Mapping):
            raise PluginLoadError(
                f"plugin {info.name!r}: mcp_servers must be a mapping of server names to "
                f"server tables, got {type(declared).__name__}",
                plugin=info.name,
            )
        for name, table in declared.items():
            try:
                found[str(name)] = McpServerSettings.model_validate(table)
            except ValueError as error:
                raise PluginLoadError(
                    f"plugin {info.name!r}: MCP server {name!r}: {error}", plugin=info.name
                ) from None
    try:
        for path in agent.settings.mcp.server_files:
            found.update(servers_from_json(path))
    except ValueError as error:
        raise PluginLoadError(str(error), plugin="mcp") from None
    found.update(agent.settings.mcp.servers)
    try:
        return {
            name: expand_variables(name, server) for name, server in found.items() if server.enabled
        }
    except ValueError as error:
        raise PluginLoadError(str(error), plugin="mcp") from None


class _Binding:
    """One agent's hold on its connections and the tools they gave it."""

    def __init__(
        self,
        agent: Agent,
        servers: dict[str, McpServerSettings],
        connections: dict[str, Connection],
    ) -> None:
        self.servers = servers
        self.connections = connections
        self.versions = {name: -1 for name in connections}
        self.left_out: dict[str, dict[str, str]] = {name: {} for name in connections}
        self.agent_ref: Callable[[], Agent | None] = weakref.ref(agent)
        self.closed = False
        self.samplers = {
            name: Sampler(name, settings.sampling_budget, self.agent_ref)
            for name, settings in servers.items()
            if settings.sampling_budget
        }

    def tools(self) -> list[Tool]:
        """Every usable tool of every server; the others go to :attr:`left_out`, reported."""
        found: list[Tool] = []
        owner: dict[str, str] = {}
        for name, connection in self.connections.items():
            self.versions[name] = connection.tools_version
            left_out = self.left_out[name] = dict(connection.skipped)
            for tool in _server_tools(name, self.servers[name], connection, left_out):
                first = owner.setdefault(tool.name, name)
                if first != name:
                    reason = (
                        f'MCP server "{first}" has a tool named "{tool.name}" too; set '
                        f'tool_prefix on one of them (e.g. tool_prefix = "{name}" on "{name}")'
                    )
                    left_out[tool.remote_name] = reason
                    _log.warning("mcp_tool_collision", server=name, tool=tool.name, reason=reason)
                    continue
                if isinstance(tool, McpTool):
                    tool.sampler = self.samplers.get(name)
                found.append(tool)
        return found

    async def close(self) -> None:
        """Release every connection (on the runtime loop, whichever loop calls this)."""
        if self.closed:
            return
        self.closed = True
        await runtime.call(self._release_all())

    async def _release_all(self) -> None:
        for connection in self.connections.values():
            connection.listeners.discard(self.refresh)
            await release(connection)

    def refresh(self) -> None:
        """Swap the agent's tools of a server whose tool list changed (from the next turn on)."""
        agent = self.agent_ref()
        if agent is None or self.closed:
            return
        current = {tool.name: tool for tool in agent.state.tools}
        mine = {n for n, tool in current.items() if isinstance(tool, McpTool | McpResourceTool)}
        kept = [tool for name, tool in current.items() if name not in mine]
        taken = {tool.name for tool in kept}
        for tool in self.tools():
            assert isinstance(tool, McpTool | McpResourceTool)
            if tool.name in taken:
                _log.warning("mcp_tool_name_taken", tool=tool.name, server=tool.server)
                continue
            taken.add(tool.name)
            kept.append(tool)
        agent.configure(tools=kept)


def _server_tools(
    name: str, settings: McpServerSettings, connection: Connection, left_out: dict[str, str]
) -> list[McpTool | McpResourceTool]:
    found: list[McpTool | McpResourceTool] = []
    wanted = settings.include is None or RESOURCE_TOOL in settings.include
    if connection.resources and wanted and RESOURCE_TOOL not in settings.exclude:
        found.append(McpResourceTool(name, settings, connection))
    for remote in connection.tools or ():
        if settings.include is not None and remote.name not in settings.include:
            continue
        if remote.name in settings.exclude:
            continue
        try:
            found.append(McpTool(name, settings, connection, remote))
        except ValueError as error:
            left_out[remote.name] = str(error)
            _log.warning("mcp_tool_skipped", server=name, tool=remote.name, reason=str(error))
    return found


async def _hold(name: str, settings: McpServerSettings) -> tuple[Connection, str | None]:
    """A hold on the server's connection, started if its tools are needed; and why not."""
    connection = await acquire(name, settings)
    if connection.tools is not None and settings.startup != "eager":
        return connection, None
    try:
        await connection.ensure_started()
    except ServerFailure as failure:
        return connection, str(failure)
    except Exception as error:  # a transport or SDK failure not described yet
        return connection, f'MCP server "{name}" failed to start: {type(error).__name__}: {error}'
    return connection, None


def bind(agent: Agent, servers: dict[str, McpServerSettings]) -> list[Tool]:
    """Hold ``servers`` for ``agent`` and return their tools; see the module docs.

    Raises :class:`~mainspring.PluginLoadError` naming the server (and quoting its
    stderr) when a ``required`` one cannot be started.
    """

    async def prepare() -> dict[str, tuple[Connection, str | None]]:
        tasks = {name: asyncio.ensure_future(_hold(name, s)) for name, s in servers.items()}
        try:
            await asyncio.wait(tasks.values())
        except BaseException:
            for task in tasks.values():
                task.cancel()
            await asyncio.wait(tasks.values())
            for task in tasks.values():
                if not task.cancelled() and task.exception() is None:
                    await release(task.result()[0])
            raise
        return {name: task.result() for name, task in tasks.items()}

    budget = max(_startup_budget(s) for s in servers.values()) + _BIND_SLACK_S
    try:
        held = runtime.call_blocking(prepare(), budget)
    except TimeoutError as error:
        raise PluginLoadError(f"MCP servers did not start: {error}", plugin="mcp") from None
    connections = {name: connection for name, (connection, _) in held.items()}
    required = [why for name, (_, why) in held.items() if why and servers[name].required]
    if required:
        runtime.call_blocking(_release_each(list(connections.values())), budget)
        reason = "\n".join(required)
        raise PluginLoadError(
            f"{reason}\n(a required MCP server: set required = false to run without it)",
            plugin="mcp",
        )
    for name, (_, why) in held.items():
        if why:
            _log.warning("mcp_server_unavailable", server=name, reason=why)
    binding = _Binding(agent, servers, connections)
    for connection in connections.values():
        connection.listeners.add(binding.refresh)
    agent.on_close(binding.close)
    weakref.finalize(agent, _release_later, binding)
    _bindings[agent] = binding
    return binding.tools()


def _startup_budget(settings: McpServerSettings) -> float:
    """How long starting the server may take: with OAuth, a person may be authorizing."""
    if settings.auth == "oauth":
        from .oauth import AUTHORIZATION_WAIT_S

        return settings.startup_timeout_s + AUTHORIZATION_WAIT_S
    return settings.startup_timeout_s


async def _release_each(connections: list[Connection]) -> None:
    for connection in connections:
        await release(connection)


def _release_later(binding: _Binding) -> None:
    if not binding.closed:
        # when the runtime is gone, interpreter exit ends the servers
        binding.closed = True
        with contextlib.suppress(RuntimeError):
            runtime.submit(binding._release_all())


_bindings: weakref.WeakKeyDictionary[Agent, _Binding] = weakref.WeakKeyDictionary()


def report(agent: Agent) -> list[dict[str, Any]]:
    """Each MCP server ``agent`` uses, for ``mainspring mcp``: one dict per server.

    Keys: ``server``, ``transport`` (``stdio``/``http``), ``target`` (command or URL),
    ``required``, ``state``, ``start_s``, ``tools`` (the agent's names), ``left_out``
    (server tool name to the reason it is not offered), ``resources`` (URIs), ``prompts``
    (names), ``protocol`` (the negotiated version) and ``error`` (the last failure).
    """
    binding = _bindings.get(agent)
    if binding is None:
        return []
    offered: dict[str, list[str]] = {}
    for tool in agent.state.tools:
        if isinstance(tool, McpTool | McpResourceTool):
            offered.setdefault(tool.server, []).append(tool.name)
    rows = []
    for name, connection in binding.connections.items():
        settings = binding.servers[name]
        rows.append(
            {
                "server": name,
                "transport": "stdio" if settings.command else "http",
                "target": settings.command or settings.url,
                "required": settings.required,
                "auth": settings.auth,
                "state": connection.state,
                "start_s": connection.started_s,
                "tools": offered.get(name, []),
                "left_out": dict(binding.left_out.get(name, {})),
                "resources": [str(resource.uri) for resource in connection.resources],
                "prompts": [prompt.name for prompt in connection.prompts],
                "protocol": connection.protocol_version,
                "error": connection.error,
            }
        )
    return rows


def connections_of(agent: Agent) -> dict[str, Connection]:
    """The connections ``agent`` holds, by server name (empty when it uses no server)."""
    binding = _bindings.get(agent)
    return dict(binding.connections) if binding is not None else {}


def status() -> list[dict[str, Any]]:
    """Each connection of the process: server, state, users, tools, error (for the CLI)."""
    from .connection import connections

    return [
        {
            "server": connection.name,
            "transport": "stdio" if connection.settings.command else "http",
            "state": connection.state,
            "users": connection.users,
            "start_s": connection.started_s,
            "tools": [tool.name for tool in connection.tools or ()],
            "error": connection.error,
        }
        for connection in connections()
    ]
