"""W3: one reply of 5,000 text deltas with one listener: the cost per delta.

The provider yields pre-built ``TextDelta`` objects (no chunking), so the figure is the
kernel's. "Kernel overhead" is mainspring's CPU time per delta minus the bare cost of
iterating the same provider stream (the same listener is called in both runs of the
comparison with the floor, which has its own per-delta listener call in its figure).
Flatness is the CPU time of the last 500 deltas over the first 500: a per-delta cost
that grows with the message length shows up there.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from .common import (
    Config,
    Row,
    ScriptProvider,
    build_agent,
    floor_text_reply,
    median,
    ms_text_reply,
    settle,
)
from .floor import FloorAgent, script

__all__ = ["run_w3"]

DELTAS = 5_000
MARK_EVERY = 500
_PIECES = [f"w{i % 10} " for i in range(DELTAS)]
_MS_REPLY = ms_text_reply(_PIECES)
_FLOOR_REPLY = floor_text_reply(_PIECES)


class _Listener:
    """Counts updates and takes a CPU timestamp every ``MARK_EVERY`` of them."""

    def __init__(self) -> None:
        self.updates = 0
        self.marks: list[float] = []

    def update(self) -> None:
        self.updates += 1
        if self.updates % MARK_EVERY == 0:
            self.marks.append(time.process_time())

    @property
    def flatness(self) -> float:
        steps = [b - a for a, b in itertools.pairwise(self.marks)]
        return steps[-1] / steps[0]


async def _mainspring() -> tuple[float, float]:
    agent, _ = build_agent([_MS_REPLY], max_turns=10)
    seen = _Listener()

    def listener(event: Any, signal: Any) -> None:
        if event.type == "message_update":
            seen.update()

    agent.subscribe(listener)
    settle()
    start = time.process_time()
    await agent.prompt("go")
    total = time.process_time() - start
    text = agent.state.messages[-1].text
    if seen.updates != DELTAS + 1 or len(text) != sum(map(len, _PIECES)):
        raise RuntimeError(f"W3 did not run as scripted ({seen.updates} updates)")
    return total / DELTAS, seen.flatness


async def _floor() -> tuple[float, float]:
    agent = FloorAgent(script([_FLOOR_REPLY]))
    seen = _Listener()

    def listener(event: dict[str, Any]) -> None:
        if event["type"] == "message_update":
            seen.update()

    agent.listeners.append(listener)
    settle()
    start = time.process_time()
    await agent.prompt("go")
    return (time.process_time() - start) / DELTAS, seen.flatness


async def _bare_stream() -> float:
    provider = ScriptProvider([_MS_REPLY])
    start = time.process_time()
    async for _ in provider.stream(None, None):  # type: ignore[arg-type]
        pass
    return (time.process_time() - start) / DELTAS


def _us(value: float) -> str:
    return f"{value * 1e6:.2f} µs"


async def run_w3(config: Config) -> list[Row]:
    """W3 rows: per-delta cost, kernel overhead per delta, flatness."""
    ms: list[tuple[float, float]] = []
    floor: list[tuple[float, float]] = []
    bare: list[float] = []
    for rep in range(config.reps + 1):
        one, other, stream = await _mainspring(), await _floor(), await _bare_stream()
        if rep:
            ms.append(one)
            floor.append(other)
            bare.append(stream)
    per_delta, floor_delta = median([m[0] for m in ms]), median([f[0] for f in floor])
    overhead = per_delta - median(bare)
    floor_overhead = floor_delta - median(bare)
    flat, floor_flat = median([m[1] for m in ms]), median([f[1] for f in floor])
    return [
        Row("W3 per delta, total (CPU)", _us(per_delta), _us(floor_delta),
            per_delta / floor_delta, "info", None),
        Row("W3 kernel overhead per delta", _us(overhead), _us(floor_overhead),
            overhead / floor_overhead, "≤2.5 µs", overhead <= 2.5e-6,
            f"bare stream {median(bare) * 1e6:.2f} µs/delta"),
        Row("W3 flatness (last 500 / first 500)", f"{flat:.2f}", f"{floor_flat:.2f}", None,
            "info", None),
    ]  # fmt: skip
