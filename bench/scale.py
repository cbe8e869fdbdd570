"""Many agents: memory of idle agents, and throughput of concurrent short runs.

Idle agents are built in a fresh child process (``python -m bench.scale idle N SIDE``)
so the resident-set delta is clean: RSS after building and keeping ``N`` agents (after a
collection) minus RSS before. Concurrent runs: ``N`` agents (built outside the timing),
each with one text reply, all prompted at once with ``asyncio.gather``; throughput is
runs per second of wall time.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from typing import Any

from mainspring import Agent

from .common import (
    Config,
    Row,
    ScriptProvider,
    build_agent,
    floor_text_reply,
    median,
    ms_text_reply,
    ms_tool_reply,
    noop_tool,
    settle,
)
from .floor import FloorAgent, script

__all__ = ["run_scale"]

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * _PAGE


def _idle_child(count: int, side: str) -> dict[str, float]:
    provider = ScriptProvider([])
    if side == "mainspring":
        Agent(model="faux:bench", provider=provider, autoload=False)  # imports, caches
    gc.collect()
    before = _rss()
    start = time.perf_counter()
    agents: list[Any] = []
    for _ in range(count):
        if side == "mainspring":
            agents.append(Agent(model="faux:bench", provider=provider, autoload=False))
        else:
            agents.append(FloorAgent(script([])))
    built = time.perf_counter() - start
    gc.collect()
    return {"rss": _rss() - before, "seconds": built, "count": len(agents)}


def _ran_child(count: int) -> dict[str, float]:
    """``count`` agents each running a two-turn tool run, all at once, in this process.

    Each agent is built, prompted (one tool call, then a text reply) and kept with its
    transcript. Memory is the RSS delta after a collection with every agent kept; the
    rate is runs per second of the wall time of ``asyncio.gather`` over the prompts
    (the agents are built before it; building is reported apart).
    """
    replies = [ms_tool_reply(["c1"]), ms_text_reply()]
    tool = noop_tool()

    def agent() -> Agent:
        return Agent(
            model="faux:bench", provider=ScriptProvider(replies), autoload=False, tools=[tool]
        )

    async def everything(agents: list[Agent]) -> float:
        start = time.perf_counter()
        await asyncio.gather(*(one.prompt("go") for one in agents))
        return time.perf_counter() - start

    asyncio.run(_warm(agent()))
    gc.collect()
    before = _rss()
    start = time.perf_counter()
    agents = [agent() for _ in range(count)]
    built = time.perf_counter() - start
    wall = asyncio.run(everything(agents))
    if any(len(one.state.messages) != 4 for one in agents):
        raise RuntimeError("a two-turn tool run did not finish as scripted")
    gc.collect()
    return {"rss": _rss() - before, "seconds": wall, "built": built, "count": len(agents)}


async def _warm(agent: Agent) -> None:
    await agent.prompt("go")


def _idle(count: int, side: str) -> dict[str, float]:
    return _child("idle", count, side)


def _child(mode: str, count: int, side: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.scale", mode, str(count), side],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


async def _concurrent_ms(count: int) -> float:
    agents = [build_agent([ms_text_reply()], max_turns=10)[0] for _ in range(count)]
    settle()
    start = time.perf_counter()
    await asyncio.gather(*(agent.prompt("hi") for agent in agents))
    wall = time.perf_counter() - start
    if any(agent.state.messages[-1].stop_reason != "stop" for agent in agents):
        raise RuntimeError("a concurrent run did not finish as scripted")
    return count / wall


async def _concurrent_floor(count: int) -> float:
    agents = [FloorAgent(script([floor_text_reply()])) for _ in range(count)]
    settle()
    start = time.perf_counter()
    await asyncio.gather(*(agent.prompt("hi") for agent in agents))
    return count / (time.perf_counter() - start)


async def run_scale(config: Config) -> list[Row]:
    """Rows: memory of idle agents, throughput of concurrent runs."""
    idle_n = 1_000 if config.quick else 10_000
    runs_n = 200 if config.quick else 1_000
    ms, floor = _idle(idle_n, "mainspring"), _idle(idle_n, "floor")
    mb, floor_mb = ms["rss"] / 2**20, floor["rss"] / 2**20
    projected = mb * 10_000 / idle_n
    rates, floor_rates = [], []
    for rep in range(config.reps + 1):
        one, other = await _concurrent_ms(runs_n), await _concurrent_floor(runs_n)
        if rep:
            rates.append(one)
            floor_rates.append(other)
    rate, floor_rate = median(rates), median(floor_rates)
    per_agent = ms["seconds"] / idle_n * 1e3
    ran = _child("ran", idle_n, "mainspring")
    ran_kb = ran["rss"] / 1024 / idle_n
    return [
        Row(f"{idle_n:,} idle agents, RSS delta", f"{mb:,.1f} MB", f"{floor_mb:,.2f} MB",
            mb / floor_mb if floor_mb > 0 else None, "≤500 MB per 10,000",
            projected <= 500,
            f"{mb * 1024 / idle_n:.1f} KB/agent; built in {ms['seconds']:.1f} s "
            f"({per_agent:.2f} ms each)"),
        Row(f"{runs_n:,} concurrent short runs", f"{rate:,.0f} runs/s",
            f"{floor_rate:,.0f} runs/s", floor_rate / rate, "info", None,
            "asyncio.gather of prompt(); one text reply each"),
        Row(f"{idle_n:,} agents, a two-turn tool run each, RSS delta", f"{ran_kb:.1f} KB/agent",
            "—", None, "≤15 KB/agent", ran_kb <= 15,
            "every agent kept with its transcript, after a collection"),
        Row(f"{idle_n:,} agents, a two-turn tool run each, all at once",
            f"{idle_n / ran['seconds']:,.0f} runs/s", "—", None, "≥1,500 runs/s",
            idle_n / ran["seconds"] >= 1_500,
            f"built before, {ran['built'] / idle_n * 1e3:.2f} ms each"),
    ]  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "idle":
        print(json.dumps(_idle_child(int(sys.argv[2]), sys.argv[3])))
    elif len(sys.argv) == 4 and sys.argv[1] == "ran":
        print(json.dumps(_ran_child(int(sys.argv[2]))))
    else:
        sys.exit("usage: python -m bench.scale idle|ran COUNT mainspring|floor")
