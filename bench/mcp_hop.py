"""The hop between an agent's loop and the MCP runtime thread, before and after, interleaved.

``python -m bench.mcp_hop [--reps N]``: in one process, one server (``bench/mcp_server.py``
over stdio), rounds that alternate

- the SDK's own round trip (``ClientSession.call_tool`` on the runtime loop),
- an agent's MCP tool call through :func:`mainspring.mcp.runtime.call` (now: the
  coroutine started by one wake-up of the runtime loop, its outcome delivered by one
  wake-up of the caller's loop from its last step),
- the same through the hop it replaced (``asyncio.run_coroutine_threadsafe`` and
  ``asyncio.wrap_future``: a concurrent future between the two loops),
- the same tool native (the floor the agent's own turn costs),
- the bare hop of each kind (a coroutine that returns at once),

and, beside them, what no hop at all would cost: a second server whose connection is
started on the agent's own loop (not how mainspring runs connections: they are shared by
agents on any loop and must outlive each ``asyncio.run()``), called by an agent with
:func:`~mainspring.mcp.runtime.call` replaced by a plain ``await``, and the SDK's round
trip on that loop. It prints the medians and the ratio the ``mcp`` workload reports:
(agent's MCP turn − native turn) / SDK round trip, and each other side's ratio less the
hop's, round by round (their median, and in how many rounds it is lower). A report,
never a test; read it on a quiet machine, or read the per-round differences.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from mainspring import Agent, Settings
from mainspring.settings import McpSettings

from .common import ScriptProvider
from .mcp_calls import CALLS, native_once, per_call, sdk_once, server_settings, tool_script

Hop = Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]]


async def _before(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """The hop as it was: a concurrent future between the loops."""
    from mainspring.mcp import runtime

    future = runtime.submit(coroutine)
    try:
        return await asyncio.wrap_future(future)
    finally:
        future.cancel()


async def _no_hop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """No hop: the call runs on the caller's loop (only for a connection started there)."""
    return await coroutine


async def _agent_turns(settings: Settings, hop: Hop) -> float:
    from mainspring.mcp import runtime

    now = runtime.call
    runtime.call = hop  # type: ignore[assignment]  # the tool reaches the runtime through it
    try:
        agent = Agent(model="faux:bench", provider=ScriptProvider(tool_script()), settings=settings,
                      autoload=False)  # fmt: skip
        async with agent:
            return await per_call(agent)
    finally:
        runtime.call = now  # type: ignore[method-assign]


async def _bare(hop: Hop) -> float:
    async def nothing() -> None:
        return None

    start = time.perf_counter()
    for _ in range(CALLS):
        await hop(nothing())
    return (time.perf_counter() - start) / CALLS


async def _sdk_here(session: Any) -> float:
    """The SDK's round trip on the caller's loop, for a connection started there."""
    start = time.perf_counter()
    for _ in range(CALLS):
        await session.call_tool("noop", {})
    return (time.perf_counter() - start) / CALLS


async def main(reps: int) -> None:
    from mainspring.mcp import runtime
    from mainspring.mcp.connection import acquire, release

    settings = Settings(mcp=McpSettings(servers={"bench": server_settings()}))
    holder = Agent(model="faux:bench", provider=ScriptProvider([]), settings=settings,
                   autoload=False)  # fmt: skip
    # a server of its own (another transport key) whose connection lives on this loop
    own = server_settings("own-loop")
    own_settings = Settings(mcp=McpSettings(servers={"bench": own}))
    own_connection = await acquire("bench", own)
    now: Hop = runtime.call
    names = ("sdk", "native", "after", "before", "bare after", "bare before", "own-loop sdk")
    sides: dict[str, list[float]] = {k: [] for k in (*names, "own loop")}
    try:
        own_session = await own_connection.ensure_started()
        await _agent_turns(settings, now)  # warm-up
        await _agent_turns(own_settings, _no_hop)
        for _ in range(reps):
            sides["sdk"].append(await sdk_once("bench", settings.mcp.servers["bench"]))
            sides["native"].append(await native_once())
            sides["after"].append(await _agent_turns(settings, now))
            sides["own-loop sdk"].append(await _sdk_here(own_session))
            sides["own loop"].append(await _agent_turns(own_settings, _no_hop))
            sides["before"].append(await _agent_turns(settings, _before))
            sides["bare after"].append(await _bare(now))
            sides["bare before"].append(await _bare(_before))
    finally:
        await release(own_connection)
        await holder.aclose()
    median = {name: statistics.median(values) for name, values in sides.items()}
    for name, value in median.items():
        print(f"{name:12s} {value * 1e6:9.1f} µs per call (median of {reps})")
    for side in ("before", "after"):
        ratio = (median[side] - median["native"]) / median["sdk"]
        print(f"{side:8s}: MCP call through mainspring over the SDK's round trip {ratio:.2f}×")
    own_ratio = (median["own loop"] - median["native"]) / median["own-loop sdk"]
    print(f"own loop: no hop, over the SDK's round trip on that loop {own_ratio:.2f}×")
    # each round's own ratios, compared within the round (the machine's drift cancels out)
    per_round = {
        side: [
            (spent - native) / trip
            for spent, native, trip in zip(sides[side], sides["native"], sides[sdk], strict=True)
        ]
        for side, sdk in (("after", "sdk"), ("before", "sdk"), ("own loop", "own-loop sdk"))
    }
    for side in ("before", "own loop"):
        deltas = [x - y for x, y in zip(per_round[side], per_round["after"], strict=True)]
        lower = sum(delta < 0 for delta in deltas)
        print(f"{side} − after, per round: median {statistics.median(deltas):+.2f}× "
              f"(lower in {lower} of {reps} rounds)")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9)
    asyncio.run(main(parser.parse_args().reps))
