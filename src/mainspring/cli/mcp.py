"""``mainspring mcp``: the configured MCP servers, their state and their tools.

Builds an agent as ``mainspring run`` would (so every configured server, from the config
file, ``--mcp`` and installed plugins, is started or reused to learn its tools), prints one
block per server (or, with ``--json``, a JSON array of the rows of
:func:`mainspring.mcp.report`), then closes the agent, which stops the servers. A server
that could not start is listed with its state and the reason (only a ``required`` one
stops the agent from being built).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from ..agent import Agent

__all__ = ["add_mcp_option", "mcp_command", "server_of"]


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
