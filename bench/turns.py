"""W1 (200 turns of one tool call each) and W1h (the same with 20 hook plugins).

Per-turn cost is the run's CPU time (``time.process_time``) over the turn count;
flatness is the mean CPU time of the last 20 tool turns over the first 20, from
timestamps taken at each ``turn_end`` (turn 0, which also carries the run's start, and
the final text-only turn are left out so both windows do the same work).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
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
from .plugins import (
    AsyncHookPlugin,
    FloorHookPlugin,
    NonblockingHookPlugin,
    SyncHookPlugin,
    hook_plugins,
)

__all__ = ["run_w1", "run_w1h"]

TURNS = 200
WINDOW = 20
HANDOVERS_PER_TURN = 6
"""W1h's plain ``def`` plugins: six hooks called once per turn (one tool call); the 20
plain ``def`` implementations of one hook call share one worker-thread hand-over."""
CALLS_PER_TURN = 20 * (6 + 13)
"""W1h's implementation calls per turn: 20 plugins on six once-per-turn hooks and on the
turn's 13 events."""
W1H_TARGETS: dict[str, int | None] = {"def, @nonblocking": 50, "def": 1_000, "async def": None}
"""µs per turn that 20 plugins may add (``None``: a report): the plain ``def`` ones pay a
worker-thread hand-over per hook call; an ``async def`` costs its coroutine."""


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
        durations = [b - a for a, b in itertools.pairwise(self.marks)]
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


Variant = Callable[[], Awaitable[Measured]]


async def _interleaved(config: Config, variants: dict[str, Variant]) -> dict[str, list[Measured]]:
    """Run every variant once per repetition, in turn, so drift hits them all alike."""
    runs: dict[str, list[Measured]] = {name: [] for name in variants}
    for rep in range(config.reps + 1):  # the first round is a warm-up
        for name, variant in variants.items():
            measured = await variant()
            if rep:
                runs[name].append(measured)
    return runs


def _per_turn(runs: list[Measured]) -> float:
    return median([m.per_turn_us for m in runs])


def _us(value: float) -> str:
    return f"{value:,.1f} µs"


async def run_w1(config: Config) -> list[Row]:
    """W1: per-turn CPU and flatness; and the cost of the built-in ``event_log``."""
    runs = await _interleaved(
        config,
        {
            "ms": mainspring_once,
            "floor": floor_once,
            "bare": lambda: mainspring_once(disable=["event_log"]),
        },
    )
    per_turn, floor_turn, bare_turn = (_per_turn(runs[key]) for key in ("ms", "floor", "bare"))
    flat = median([m.flatness for m in runs["ms"]])
    floor_flat = median([m.flatness for m in runs["floor"]])
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
    runs = await _interleaved(
        config,
        {
            "ms": mainspring_once,
            "def, @nonblocking": lambda: mainspring_once(
                plugins=hook_plugins(NonblockingHookPlugin)
            ),
            "def": lambda: mainspring_once(plugins=hook_plugins(SyncHookPlugin)),
            "async def": lambda: mainspring_once(plugins=hook_plugins(AsyncHookPlugin)),
            "floor": floor_once,
            "floor hooked": lambda: floor_once(hook_plugins(FloorHookPlugin)),
        },
    )
    base_us = _per_turn(runs["ms"])
    floor_added = _per_turn(runs["floor hooked"]) - _per_turn(runs["floor"])
    rows = []
    for label, limit_us in W1H_TARGETS.items():
        added = _per_turn(runs[label]) - base_us
        note = f"flatness {median([m.flatness for m in runs[label]]):.2f}"
        if label == "def":  # six hooks of 20 plugins, each call handed to a worker thread
            note += f"; {added / HANDOVERS_PER_TURN:,.0f} µs per hand-over"
        if label == "async def":  # every implementation is a coroutine created and awaited
            note += f"; {added / CALLS_PER_TURN:,.2f} µs per call"
        rows.append(
            Row(
                f"W1h added per turn, 20 plugins ({label})",
                _us(added),
                _us(floor_added),
                added / floor_added if floor_added > 0 else None,
                "info" if limit_us is None else f"≤{limit_us:,} µs",
                None if limit_us is None else added <= limit_us,
                note,
            )
        )
    return rows
