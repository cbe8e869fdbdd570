"""W1 (200 turns of one tool call each) and W1h (the same with 20 hook plugins).

Per-turn cost is the run's CPU time (``time.process_time``) over the turn count;
flatness is the mean CPU time of the last 20 tool turns over the first 20, from
timestamps taken at each ``turn_end`` (turn 0, which also carries the run's start, and
the final text-only turn are left out so both windows do the same work).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .common import (
    Config,
    Row,
    build_agent,
    floor_text_reply,
    floor_tool_reply,
    median,
    ms_text_reply,
    ms_tool_reply,
    noop_tool,
    settle,
)
from .floor import FloorAgent, noop, script
from .plugins import AsyncHookPlugin, FloorHookPlugin, SyncHookPlugin, hook_plugins

__all__ = ["run_w1", "run_w1h"]

TURNS = 200
WINDOW = 20


class Measured:
    """One run: total CPU seconds and the CPU time at the start and at each ``turn_end``."""

    __slots__ = ("marks", "total")

    def __init__(self, total: float, marks: list[float]) -> None:
        self.total = total
        self.marks = marks

    @property
    def per_turn_us(self) -> float:
        return self.total / TURNS * 1e6

    @property
    def flatness(self) -> float:
        durations = [b - a for a, b in zip(self.marks, self.marks[1:], strict=False)]
        tool_turns = durations[1:-1]
        first, last = tool_turns[:WINDOW], tool_turns[-WINDOW:]
        return (sum(last) / len(last)) / (sum(first) / len(first))


_MS_SCRIPT = [ms_tool_reply([f"call_{i}"]) for i in range(TURNS - 1)] + [ms_text_reply()]
_FLOOR_SCRIPT = [floor_tool_reply([f"call_{i}"]) for i in range(TURNS - 1)] + [floor_text_reply()]


async def mainspring_once(plugins: Sequence[Any] = (), disable: Sequence[str] = ()) -> Measured:
    """W1 through mainspring."""
    agent, _ = build_agent(_MS_SCRIPT, tools=[noop_tool()], plugins=plugins, disable=disable)
    marks: list[float] = []
    clock = time.process_time

    def listener(event: Any, signal: Any) -> None:
        if event.type == "turn_end":
            marks.append(clock())

    agent.subscribe(listener)
    settle()
    start = clock()
    await agent.prompt("go")
    total = clock() - start
    _check_mainspring(agent.state.messages, len(marks))
    return Measured(total, [start, *marks])


def _check_mainspring(messages: Sequence[Any], turns: int) -> None:
    results = [m for m in messages if m.role == "tool_result"]
    if turns != TURNS or len(results) != TURNS - 1 or any(r.is_error for r in results):
        bad = next((r for r in results if r.is_error), None)
        raise RuntimeError(f"W1 did not run as scripted: {turns} turns, {bad!r}")


async def floor_once(plugins: Sequence[Any] = ()) -> Measured:
    """W1 through the floor."""
    agent = FloorAgent(script(_FLOOR_SCRIPT), tools={"noop": noop}, plugins=plugins)
    marks: list[float] = []
    clock = time.process_time

    def listener(event: dict[str, Any]) -> None:
        if event["type"] == "turn_end":
            marks.append(clock())

    agent.listeners.append(listener)
    settle()
    start = clock()
    await agent.prompt("go")
    total = clock() - start
    if len(marks) != TURNS:
        raise RuntimeError(f"the floor ran {len(marks)} turns, not {TURNS}")
    return Measured(total, [start, *marks])


async def _pairs(
    config: Config, ms_kwargs: dict[str, Any], floor_plugins: type[Any] | None
) -> tuple[list[Measured], list[Measured]]:
    ms: list[Measured] = []
    floor: list[Measured] = []
    for rep in range(config.reps + 1):  # the first pair is a warm-up
        kwargs = dict(ms_kwargs)
        if "plugin_kind" in kwargs:
            kwargs["plugins"] = hook_plugins(kwargs.pop("plugin_kind"))
        one = await mainspring_once(**kwargs)
        other = await floor_once(hook_plugins(floor_plugins) if floor_plugins else ())
        if rep:
            ms.append(one)
            floor.append(other)
    return ms, floor


def _us(value: float) -> str:
    return f"{value:,.1f} µs"


async def run_w1(config: Config) -> list[Row]:
    """W1: per-turn CPU and flatness; and the cost of the built-in ``event_log``."""
    ms, floor = await _pairs(config, {}, None)
    bare, _ = await _pairs(config, {"disable": ["event_log"]}, None)
    per_turn = median([m.per_turn_us for m in ms])
    floor_turn = median([m.per_turn_us for m in floor])
    bare_turn = median([m.per_turn_us for m in bare])
    flat = median([m.flatness for m in ms])
    floor_flat = median([m.flatness for m in floor])
    ratio = per_turn / floor_turn
    return [
        Row("W1 per turn (CPU)", _us(per_turn), _us(floor_turn), ratio, "≤5× floor", ratio <= 5),
        Row("W1 flatness (last 20 / first 20)", f"{flat:.2f}", f"{floor_flat:.2f}", None,
            "≤1.2", flat <= 1.2),
        Row("W1 per turn, event_log disabled", _us(bare_turn), _us(floor_turn),
            bare_turn / floor_turn, "info", None,
            f"event_log costs {per_turn - bare_turn:,.1f} µs/turn"),
    ]  # fmt: skip


async def run_w1h(config: Config) -> list[Row]:
    """W1h: µs per turn that 20 plugins implementing every run-time hook add to W1."""
    base, floor_base = await _pairs(config, {}, None)
    hooked, floor_hooked = await _pairs(config, {"plugin_kind": SyncHookPlugin}, FloorHookPlugin)
    async_hooked, _ = await _pairs(config, {"plugin_kind": AsyncHookPlugin}, None)
    base_us = median([m.per_turn_us for m in base])
    floor_added = median([m.per_turn_us for m in floor_hooked]) - median(
        [m.per_turn_us for m in floor_base]
    )
    rows = []
    for label, runs in (("def", hooked), ("async def", async_hooked)):
        added = median([m.per_turn_us for m in runs]) - base_us
        rows.append(
            Row(
                f"W1h added per turn, 20 plugins ({label})",
                _us(added),
                _us(floor_added),
                added / floor_added if floor_added > 0 else None,
                "≤50 µs",
                added <= 50,
                f"flatness {median([m.flatness for m in runs]):.2f}",
            )
        )
    return rows
