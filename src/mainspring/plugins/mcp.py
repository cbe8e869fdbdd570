"""Built-in plugin: the tools of the configured MCP servers (see ``docs/mcp.md``).

Servers come from ``settings.mcp.servers``, from the JSON files named in
``settings.mcp.server_files`` (Claude Desktop's ``mcpServers`` format, read by
:func:`servers_from_json`) and from plugins' ``mcp_servers`` attribute
(:func:`mainspring.mcp.configured_servers`). With none configured this plugin contributes
nothing and the ``mcp`` SDK is never imported; with some, the SDK must be installed
(``pip install 'mainspring[mcp]'``) or the agent does not start.

This module also reads ``--mcp`` (:func:`parse_server_option`); none of it needs the SDK.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..contract.markers import hookimpl
from ..settings import McpServerSettings, Settings

if TYPE_CHECKING:
    from ..agent import Agent
    from ..tools import Tool


CAPABILITIES = ("tools",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""


def _declares_servers(agent: Agent) -> bool:
    if agent.settings.mcp.server_files:
        return True
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


_USAGE = "--mcp takes NAME=COMMAND, NAME=URL, NAME={TOML table} or a JSON file of mcpServers"


def parse_server_option(value: str) -> dict[str, McpServerSettings]:
    """The servers one ``--mcp`` value names, as ``mainspring run --mcp`` takes it.

    ``NAME=COMMAND ARGS...`` (split like a shell would), ``NAME=URL``, ``NAME={...}`` (an
    inline TOML table with any server setting: ``NAME={url="...", headers={...}}``), or
    the path of a JSON file in Claude Desktop's ``mcpServers`` format. ``ValueError``
    (a sentence) for anything else.
    """
    import shlex

    if os.path.isfile(os.path.expanduser(value)):
        return servers_from_json(value)
    name, sep, rest = value.partition("=")
    name, rest = name.strip(), rest.strip()
    if not sep or not name or not rest:
        raise ValueError(f"{_USAGE}, got {value!r}")
    if rest.startswith("{"):
        try:
            table = tomllib.loads(f"server = {rest}")["server"]
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"--mcp {name}: not an inline TOML table: {error}") from None
        return {name: _server(table, f"--mcp {name}")}
    if rest.startswith(("http://", "https://")):
        return {name: McpServerSettings(url=rest)}
    words = shlex.split(rest)
    return {name: McpServerSettings(command=words[0], args=tuple(words[1:]))}


def servers_from_json(path: str) -> dict[str, McpServerSettings]:
    """The servers of a JSON file in Claude Desktop's format, ``{"mcpServers": {NAME: {}}}``.

    Each entry's ``command``, ``args``, ``env``, ``cwd``, ``url`` and ``headers`` (and any
    other server setting, such as ``tool_prefix``) are read; ``"disabled": true`` disables
    it; ``type`` may be ``stdio``, ``http`` or ``streamable-http`` (SSE is refused).
    ``ValueError`` naming the file (and the server) when it cannot be used.
    """
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as error:
        raise ValueError(f"cannot read the MCP server file {path}: {error.strerror}") from None
    except ValueError as error:
        raise ValueError(f"the MCP server file {path} is not JSON: {error}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ValueError(f'the MCP server file {path} has no "mcpServers" object')
    found: dict[str, McpServerSettings] = {}
    for name, entry in servers.items():
        where = f'{path}: MCP server "{name}"'
        if not isinstance(entry, dict):
            raise ValueError(f"{where} is not an object")
        kind = entry.get("type", "stdio" if "command" in entry else "http")
        if kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
            raise ValueError(f"{where}: the {kind!r} transport is not supported (stdio or http)")
        table = {key: value for key, value in entry.items() if key in _SETTINGS}
        if entry.get("disabled") is True:
            table["enabled"] = False
        found[str(name)] = _server(table, where)
    return found


_SETTINGS = frozenset(McpServerSettings.model_fields)


def _server(table: Any, where: str) -> McpServerSettings:
    try:
        return McpServerSettings.model_validate(table)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"{where}: {field + ': ' if field else ''}{first['msg']}") from None


def with_servers(servers: Mapping[str, McpServerSettings], settings: Settings) -> Settings:
    """``settings`` with ``servers`` added to (replacing same-named) ``mcp.servers``."""
    merged = {**settings.mcp.servers, **servers}
    mcp = settings.mcp.model_copy(update={"servers": merged})
    return settings.model_copy(update={"mcp": mcp})
