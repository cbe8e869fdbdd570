"""The MCP server the ``mcp`` workload calls: one tool, ``noop``, over stdio."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("mainspring-bench")


@server.tool()
def noop() -> str:
    """Do nothing and say so."""
    return "ok"


if __name__ == "__main__":
    server.run("stdio")
