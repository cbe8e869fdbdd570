"""``mainspring mcp``: the configured MCP servers, their state and their tools.

Builds an agent as ``mainspring run`` would (so every configured server, from the config
file, ``--mcp`` and installed plugins, is started or reused to learn its tools), prints one
block per server (or, with ``--json``, a JSON array of the rows of
:func:`mainspring.mcp.report`), then closes the agent, which stops the servers. A server
that could not start is listed with its state and the reason (only a ``required`` one
stops the agent from being built).

``mainspring mcp login NAME`` authorizes the server NAME (``auth = "oauth"``): the agent is
built the same way with the authorization URL of NAME printed on stdout (whether or not
stdin is a terminal), and once the browser's redirect arrives the token is kept in the
data directory for every later agent. A server already authorized is only reported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from ..agent import Agent
from .errors import usage_error

__all__ = ["add_mcp_option", "login_command", "mcp_command", "prepare_login", "server_of"]


def add_mcp_option(parser: argparse.ArgumentParser) -> None:
    """``--mcp NAME=COMMAND`` (repeatable): MCP servers for this invocation only."""
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="use the MCP server NAME started by COMMAND, at an http(s) URL, or described by "
        "an inline TOML table (NAME={url=..., headers={...}}); or the servers of a JSON file "
        "in Claude Desktop's mcpServers format (repeatable)",
    )


def apply_mcp_option(values: list[str], settings: Any) -> Any:
    """``settings`` with the ``--mcp`` servers added; ``ValueError`` for a malformed one."""
    if not values:
        return settings
    from ..plugins.mcp import parse_server_option, with_servers

    servers: dict[str, Any] = {}
    for value in values:
        servers.update(parse_server_option(value))
    return with_servers(servers, settings)


def server_of(tool: Any) -> str | None:
    """The MCP server a tool comes from, or ``None`` for a native tool."""
    server = getattr(tool, "server", None)
    return server if isinstance(server, str) else None


def mcp_command(agent: Agent, as_json: bool) -> int:
    """Print the servers ``agent`` uses, their state and tools; close the agent; return 0."""
    rows: list[dict[str, Any]] = []
    if "mainspring.mcp" in sys.modules:  # imported only when a server is configured
        from ..mcp import report

        rows = report(agent)
    asyncio.run(agent.aclose())
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no MCP servers configured (add [mcp.servers.NAME] to the config file)")
    for row in rows:
        started = f", started in {row['start_s']:.2f} s" if row["start_s"] else ""
        print(f"{row['server']}  ({row['transport']}: {row['target']}; {row['state']}{started})")
        print(f"    tools: {', '.join(row['tools']) or '-'}")
        for tool, reason in row["left_out"].items():
            print(f"    left out: {tool}: {reason}")
        if row["resources"]:
            print(f"    resources: {', '.join(row['resources'])}")
        if row["prompts"]:
            print(f"    prompts: {', '.join(row['prompts'])}")
        if row["error"]:
            print(f"    error: {row['error']}")
    return 0


def prepare_login(name: str) -> None:
    """Print the authorization URL of the server ``name`` on stdout from now on.

    ``ImportError`` when the ``mcp`` extra is missing."""
    from ..mcp import oauth

    def show(server: str, url: str) -> None:
        if server != name:
            oauth.on_terminal(server, url)
            return
        print(
            f'Open this address in a browser to authorize the MCP server "{server}" '
            f"(waiting up to {oauth.AUTHORIZATION_WAIT_S:.0f} s):\n{url}",
            flush=True,
        )

    oauth.set_authorization_handler(show)


def login_command(agent: Agent, name: str) -> int:
    """Report whether the server ``name`` of ``agent`` is authorized (0; 1 when it is not,
    2 when it is not an OAuth server of the agent); close the agent."""
    from ..mcp.binding import connections_of

    connection = connections_of(agent).get(name)
    state, error = (None, None) if connection is None else (connection.state, connection.error)
    auth = None if connection is None else connection.settings.auth
    asyncio.run(agent.aclose())
    if connection is None:
        return usage_error(f"no MCP server named {name!r} is configured")
    if auth != "oauth":
        return usage_error(f'MCP server "{name}" does not use OAuth (set auth = "oauth" on it)')
    if state != "running":
        print(
            f"mainspring: error: {error or f'MCP server {name!r} did not start'}", file=sys.stderr
        )
        return 1  # as a failed run
    print(f'MCP server "{name}" is authorized (its token is kept in the data directory)')
    return 0
