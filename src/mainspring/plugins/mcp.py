"""Built-in plugin: the tools of the configured MCP servers (see ``docs/mcp.md``).

Servers come from ``settings.mcp.servers`` and from plugins' ``mcp_servers`` attribute
(:func:`mainspring.mcp.configured_servers`). With none configured this plugin contributes
nothing and the ``mcp`` SDK is never imported; with some, the SDK must be installed
(``pip install 'mainspring[mcp]'``) or the agent does not start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..hookspecs import hookimpl
from ..settings import McpServerSettings, Settings

if TYPE_CHECKING:
    from ..kernel.agent import Agent
    from ..tools import Tool


CAPABILITIES = ("tools",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""


def _declares_servers(agent: Agent) -> bool:
    if any(server.enabled for server in agent.settings.mcp.servers.values()):
        return True
    return any(getattr(info.plugin, "mcp_servers", None) for info in agent.plugins.infos)


@hookimpl
def register_tools(agent: Agent) -> list[Tool] | None:
    """The tools of every enabled MCP server, started (or reused) for this agent."""
    if not _declares_servers(agent):
        return None
    try:
        from ..mcp import bind, configured_servers
    except ImportError as error:
        raise RuntimeError(
            f"MCP servers are configured but the mcp SDK cannot be imported ({error}); "
            "install it with: pip install 'mainspring[mcp]'"
        ) from None
    servers = configured_servers(agent)
    return bind(agent, servers) if servers else None


def parse_server_option(value: str) -> tuple[str, McpServerSettings]:
    """``NAME=COMMAND ARGS...`` (or ``NAME=URL``), as ``mainspring run --mcp`` takes it."""
    import shlex

    name, sep, rest = value.partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise ValueError(f"--mcp takes NAME=COMMAND (or NAME=URL), got {value!r}")
    rest = rest.strip()
    if rest.startswith(("http://", "https://")):
        return name.strip(), McpServerSettings(url=rest)
    words = shlex.split(rest)
    return name.strip(), McpServerSettings(command=words[0], args=tuple(words[1:]))


def with_servers(servers: Mapping[str, McpServerSettings], settings: Settings) -> Settings:
    """``settings`` with ``servers`` added to (replacing same-named) ``mcp.servers``."""
    merged = {**settings.mcp.servers, **servers}
    mcp = settings.mcp.model_copy(update={"servers": merged})
    return settings.model_copy(update={"mcp": mcp})
