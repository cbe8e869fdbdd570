"""The ``mcp`` workload: what an MCP tool costs per call, and what a server costs to start.

Per call: an agent makes 100 sequential tool calls (one per turn) of ``noop``, once as a
native tool and once served by an MCP server over stdio (``bench/mcp_server.py``, the
SDK's ``MCPServer``); the difference in wall time per turn is what an MCP call costs
through mainspring. Beside it, the same tool called through the SDK alone
(``ClientSession.call_tool`` on the MCP runtime loop, no agent, no mainspring code): the
protocol's own round trip, which that cost contains. Their ratio is the row "MCP call
through mainspring over the SDK's round trip" (target: at most 1.3).

Start: spawning the server, negotiating the protocol and ``tools/list`` (what an agent
waits for when it is built), for the bench server and for ``mcp-server-time``. Needs the
``mcp`` extra (and ``mcp-server-time`` for its row).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

from mainspring import Agent, Settings
from mainspring.settings import McpServerSettings, McpSettings

from .common import Config, Row, ScriptProvider, median, ms_text_reply, ms_tool_reply, noop_tool

__all__ = [
    "CALLS",
    "native_once",
    "per_call",
    "run_mcp",
    "sdk_once",
    "server_settings",
    "tool_script",
]

CALLS = 100
SERVER = str(Path(__file__).with_name("mcp_server.py"))


def tool_script() -> list[object]:
    return [*(ms_tool_reply([f"c{i}"]) for i in range(CALLS)), ms_text_reply()]


def server_settings(nonce: str = "") -> McpServerSettings:
    env = {"MAINSPRING_BENCH_NONCE": nonce} if nonce else {}
    return McpServerSettings(command=sys.executable, args=(SERVER,), env=env)


async def per_call(agent: Agent) -> float:
    start = time.perf_counter()
    await agent.prompt("go")
    elapsed = time.perf_counter() - start
    results = [m for m in agent.state.messages if m.role == "tool_result"]
    if len(results) != CALLS or any(r.is_error for r in results):
        raise RuntimeError(f"the mcp workload did not run as scripted: {results[-1:]!r}")
    return elapsed / CALLS


async def native_once() -> float:
    agent = Agent(
        model="faux:bench",
        provider=ScriptProvider(tool_script()),
        tools=[noop_tool()],
        autoload=False,
    )
    return await per_call(agent)


async def _mcp_once(settings: Settings) -> float:
    agent = Agent(model="faux:bench", provider=ScriptProvider(tool_script()), settings=settings,
                  autoload=False)  # fmt: skip
    async with agent:
        return await per_call(agent)


async def sdk_once(name: str, server: McpServerSettings) -> float:
    from mainspring.mcp import runtime
    from mainspring.mcp.connection import acquire, release

    async def calls() -> float:
        connection = await acquire(name, server)
        try:
            session = await connection.ensure_started()  # the SDK's ClientSession
            start = time.perf_counter()
            for _ in range(CALLS):
                await session.call_tool("noop", {})
            return (time.perf_counter() - start) / CALLS
        finally:
            await release(connection)

    return await runtime.call(calls())


async def _start_once(server: McpServerSettings) -> float:
    from mainspring.mcp import runtime
    from mainspring.mcp.connection import acquire, release

    async def start() -> float:
        connection = await acquire("bench", server)
        try:
            began = time.perf_counter()
            await connection.ensure_started()
            return time.perf_counter() - began
        finally:
            await release(connection)

    return await runtime.call(start())


async def run_mcp(config: Config) -> list[Row]:
    """Per-call overhead of an MCP tool over stdio against the same tool native; start time."""
    if importlib.util.find_spec("mcp") is None:
        return [
            Row("MCP tool per call", "skipped", "—", None, "info", None, "needs mainspring[mcp]")
        ]
    shared = server_settings()
    settings = Settings(mcp=McpSettings(servers={"bench": shared}))
    holder = Agent(
        model="faux:bench", provider=ScriptProvider([]), settings=settings, autoload=False
    )  # fmt: skip  (keeps one server up for the per-call runs)
    native, mcp, sdk = [], [], []
    try:
        await _mcp_once(settings)  # warm-up
        for _ in range(config.reps):
            native.append(await native_once())
            mcp.append(await _mcp_once(settings))
            sdk.append(await sdk_once("bench", shared))
    finally:
        await holder.aclose()
    starts = [
        await _start_once(server_settings(f"start-{i}")) for i in range(max(3, config.reps // 2))
    ]
    rows = [
        Row("MCP tool per call, stdio (wall)", _us(median(mcp)), _us(median(native)),
            median(mcp) / median(native), "info", None,
            f"overhead {_us(median(mcp) - median(native))} per call; floor = the tool native"),
        Row("MCP call through the SDK alone (wall)", _us(median(sdk)), "—", None, "info", None,
            "ClientSession.call_tool round trip on the runtime loop, no agent"),
        Row("MCP call through mainspring over the SDK's round trip",
            _us(median(mcp) - median(native)), _us(median(sdk)),
            (median(mcp) - median(native)) / median(sdk), "≤ 1.3×",
            (median(mcp) - median(native)) / median(sdk) <= 1.3,
            "per call: the agent's turn with the MCP tool minus with the tool native"),
        Row("MCP server start (spawn, initialize, tools/list)", f"{median(starts) * 1e3:,.0f} ms",
            "—", None, "info", None, f"bench server (MCPServer, 1 tool), {len(starts)} starts"),
    ]  # fmt: skip
    if importlib.util.find_spec("mcp_server_time") is not None:
        time_server = McpServerSettings(command=sys.executable, args=("-m", "mcp_server_time"))
        times = [await _start_once(time_server) for _ in range(3)]
        rows.append(Row("MCP server start, mcp-server-time", f"{median(times) * 1e3:,.0f} ms",
                        "—", None, "info", None, "3 starts"))  # fmt: skip
    return rows


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"
