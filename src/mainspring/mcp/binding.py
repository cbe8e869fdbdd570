"""Which MCP servers an agent uses, and the agent's hold on their connections.

Servers come from ``agent.settings.mcp.servers`` (the config file's
``[mcp.servers.NAME]`` tables, or :class:`~mainspring.settings.Settings` built in code)
and from plugins: any registered plugin (an installed distribution's entry-point module
included) may declare servers with a module or object attribute ``mcp_servers``, a
mapping (or a function of no arguments returning one) of server names to the same tables
(:class:`~mainspring.settings.McpServerSettings` or dicts). A server named in the
settings replaces a plugin's server of the same name; disabled servers are left out.

:func:`bind` runs in the agent's constructor: it takes a hold on each server's shared
connection, learns the tools (starting the server when its tool list is not known yet in
this process, or always with ``startup="eager"``), and releases the hold when the agent is
closed (:meth:`~mainspring.Agent.aclose`) or garbage-collected.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import PluginLoadError
from ..logs import get_logger
from ..settings import McpServerSettings
from ..tools import Tool
from . import runtime
from .connection import Connection, ServerFailure, acquire, release
from .tools import McpTool

if TYPE_CHECKING:
    from ..kernel.agent import Agent

__all__ = ["bind", "configured_servers"]

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
    found.update(agent.settings.mcp.servers)
    return {name: server for name, server in found.items() if server.enabled}


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
        self.agent_ref: Callable[[], Agent | None] = weakref.ref(agent)
        self.closed = False

    def tools(self) -> list[Tool]:
        found: list[Tool] = []
        for name, connection in self.connections.items():
            self.versions[name] = connection.tools_version
            found += _server_tools(name, self.servers[name], connection)
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
        mine = {name for name, tool in current.items() if isinstance(tool, McpTool)}
        kept = [tool for name, tool in current.items() if name not in mine]
        taken = {tool.name for tool in kept}
        for tool in self.tools():
            assert isinstance(tool, McpTool)
            if tool.name in taken:
                _log.warning("mcp_tool_name_taken", tool=tool.name, server=tool.server)
                continue
            taken.add(tool.name)
            kept.append(tool)
        agent.configure(tools=kept)


def _server_tools(name: str, settings: McpServerSettings, connection: Connection) -> list[Tool]:
    found: list[Tool] = []
    for remote in connection.tools or ():
        if settings.include is not None and remote.name not in settings.include:
            continue
        if remote.name in settings.exclude:
            continue
        try:
            found.append(McpTool(name, settings, connection, remote))
        except ValueError as error:
            raise PluginLoadError(
                f'MCP server "{name}": tool {remote.name!r} cannot be used: {error}', plugin="mcp"
            ) from None
    return found


def bind(agent: Agent, servers: dict[str, McpServerSettings]) -> list[Tool]:
    """Hold ``servers`` for ``agent`` and return their tools; see the module docs.

    Raises :class:`~mainspring.PluginLoadError` naming the server (and quoting its
    stderr) when one whose tools are needed cannot be started.
    """

    async def prepare() -> dict[str, Connection]:
        held: dict[str, Connection] = {}
        try:
            for name, settings in servers.items():
                connection = held[name] = await acquire(name, settings)
                if connection.tools is None or settings.startup == "eager":
                    await connection.ensure_started()
        except BaseException:
            for connection in held.values():
                await release(connection)
            raise
        return held

    budget = sum(s.startup_timeout_s for s in servers.values()) + _BIND_SLACK_S
    try:
        connections = runtime.call_blocking(prepare(), budget)
    except ServerFailure as failure:
        raise PluginLoadError(f"{failure}", plugin="mcp") from None
    except TimeoutError as error:
        raise PluginLoadError(f"MCP servers did not start: {error}", plugin="mcp") from None
    binding = _Binding(agent, servers, connections)
    for connection in connections.values():
        connection.listeners.add(binding.refresh)
    agent.on_close(binding.close)
    weakref.finalize(agent, _release_later, binding)
    return binding.tools()


def _release_later(binding: _Binding) -> None:
    if not binding.closed:
        # when the runtime is gone, interpreter exit ends the servers
        binding.closed = True
        with contextlib.suppress(RuntimeError):
            runtime.submit(binding._release_all())


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
