"""W2: one turn with 50 tool calls that each ``await asyncio.sleep(0.05)``.

The batch wall is from the first ``tool_execution_start`` to the last
``tool_execution_end`` (so it includes the serial preparation of all 50 calls); the run
wall is the whole ``prompt()``. Ideal for both: 50 ms plus the loop's own work.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mainspring import tool

from .common import (
    Config,
    Row,
    build_agent,
    floor_text_reply,
    floor_tool_reply,
    median,
    ms_text_reply,
    ms_tool_reply,
    settle,
)
from .floor import FloorAgent, script

__all__ = ["run_w2"]

CALLS = 50
SLEEP_S = 0.05
_IDS = [f"call_{i}" for i in range(CALLS)]


@tool
async def nap() -> str:
    """Sleep 50 ms."""
    await asyncio.sleep(SLEEP_S)
    return "rested"


async def _floor_nap(args: dict[str, Any]) -> str:
    await asyncio.sleep(SLEEP_S)
    return "rested"


class _Walls:
    def __init__(self) -> None:
        self.first_start: float | None = None
        self.last_end = 0.0

    def mark(self, kind: str) -> None:
        if kind == "tool_execution_start" and self.first_start is None:
            self.first_start = time.perf_counter()
        elif kind == "tool_execution_end":
            self.last_end = time.perf_counter()

    @property
    def batch(self) -> float:
        assert self.first_start is not None
        return self.last_end - self.first_start


async def _mainspring() -> tuple[float, float]:
    agent, _ = build_agent(
        [ms_tool_reply(_IDS, name="nap"), ms_text_reply()], tools=[nap], max_turns=10
    )
    walls = _Walls()
    agent.subscribe(lambda event, signal: walls.mark(event.type))
    settle()
    start = time.perf_counter()
    await agent.prompt("go")
    run = time.perf_counter() - start
    results = [m for m in agent.state.messages if m.role == "tool_result"]
    if len(results) != CALLS or any(r.is_error for r in results):
        raise RuntimeError("W2 did not run as scripted")
    return walls.batch, run


async def _floor() -> tuple[float, float]:
    agent = FloorAgent(
        script([floor_tool_reply(_IDS, name="nap"), floor_text_reply()]),
        tools={"nap": _floor_nap},
    )
    walls = _Walls()
    agent.listeners.append(lambda event: walls.mark(event["type"]))
    settle()
    start = time.perf_counter()
    await agent.prompt("go")
    return walls.batch, time.perf_counter() - start


def _ms(value: float) -> str:
    return f"{value * 1e3:.1f} ms"


async def run_w2(config: Config) -> list[Row]:
    """W2 rows: the batch wall (target ≤55 ms) and the run wall."""
    ms: list[tuple[float, float]] = []
    floor: list[tuple[float, float]] = []
    for rep in range(config.reps + 1):
        one, other = await _mainspring(), await _floor()
        if rep:
            ms.append(one)
            floor.append(other)
    batch, floor_batch = median([m[0] for m in ms]), median([f[0] for f in floor])
    run, floor_run = median([m[1] for m in ms]), median([f[1] for f in floor])
    return [
        Row("W2 tool batch wall (50 × 50 ms)", _ms(batch), _ms(floor_batch), batch / floor_batch,
            "≤55 ms", batch <= 1.1 * SLEEP_S),
        Row("W2 run wall", _ms(run), _ms(floor_run), run / floor_run, "info", None),
    ]  # fmt: skip
