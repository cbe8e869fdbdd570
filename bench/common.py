"""Shared pieces of the benchmarks: result rows, timing helpers, the scripted model.

Every workload runs the same work twice in one process: through mainspring and through
the floor (:mod:`bench.floor`). The scripted model is the same script for both sides,
pre-built before any timing starts, so neither side pays for building deltas:
mainspring gets the kernel's own stream-event objects, the floor gets plain dicts.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mainspring import Agent, Settings, Tool, tool
from mainspring.messages import Usage
from mainspring.providers.base import (
    ModelRequest,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)

__all__ = [
    "Config",
    "Row",
    "ScriptProvider",
    "build_agent",
    "floor_text_reply",
    "floor_tool_reply",
    "median",
    "ms_text_reply",
    "ms_tool_reply",
    "noop_tool",
    "settle",
]

USAGE = Usage(input_tokens=120, output_tokens=12)
"""What every scripted reply reports: real providers report usage, so the kernel's
token estimate starts at the newest reply instead of re-reading the whole transcript."""


@dataclass(frozen=True, slots=True)
class Config:
    """How hard to run: ``reps`` measured repetitions per side (after one warm-up)."""

    reps: int
    quick: bool


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the report. ``ratio`` is always mainspring's cost over the floor's."""

    workload: str
    value: str
    floor: str
    ratio: float | None
    target: str
    passed: bool | None
    note: str = ""


def median(values: Sequence[float]) -> float:
    """The median (a single value is its own median)."""
    return float(statistics.median(values))


def settle() -> None:
    """Collect garbage so one measurement does not pay for the previous one's."""
    gc.collect()


# -- the scripted model: mainspring side ---------------------------------------------------

Reply = tuple[StreamEvent, ...]


def ms_tool_reply(call_ids: Sequence[str], name: str = "noop") -> Reply:
    """One assistant reply making a tool call per id (arguments ``{}``)."""
    deltas: list[StreamEvent] = []
    for call_id in call_ids:
        deltas += [ToolCallStart(call_id, name), ToolCallDelta(call_id, "{}"), ToolCallEnd(call_id)]
    return (*deltas, UsageReport(USAGE), StreamDone("tool_use"))


def ms_text_reply(pieces: Sequence[str] = ("done",)) -> Reply:
    """One assistant reply streaming ``pieces`` as text deltas."""
    return (*(TextDelta(piece) for piece in pieces), UsageReport(USAGE), StreamDone("stop"))


class ScriptProvider:
    """Yields pre-built replies, one per request; records when ``stream()`` is called."""

    name = "faux"

    def __init__(self, replies: Sequence[Reply], clock: Callable[[], float] = time.process_time):
        self._replies = replies
        self._next = 0
        self._clock = clock
        self.called_at: list[float] = []

    def stream(self, request: ModelRequest, signal: Any) -> AsyncIterator[StreamEvent]:
        self.called_at.append(self._clock())
        reply = self._replies[self._next]
        self._next += 1
        return _yield_all(reply)


async def _yield_all(reply: Reply) -> AsyncIterator[StreamEvent]:
    for delta in reply:
        yield delta


@tool
async def noop() -> str:
    """Do nothing and say so."""
    return "ok"


def noop_tool() -> Tool:
    """The trivial async tool every tool workload calls."""
    return noop


def build_agent(
    replies: Sequence[Reply],
    *,
    tools: Sequence[Tool] = (),
    messages: Sequence[Any] = (),
    plugins: Sequence[Any] = (),
    disable: Sequence[str] = (),
    max_turns: int = 10_000,
) -> tuple[Agent, ScriptProvider]:
    """An agent on the scripted model, with no installed plugins (built-ins only)."""
    provider = ScriptProvider(replies)
    agent = Agent(
        model="faux:bench",
        provider=provider,
        autoload=False,
        tools=tools,
        messages=messages,
        plugins=plugins,
        disable_plugins=disable,
        settings=Settings(max_turns=max_turns),
    )
    return agent, provider


# -- the scripted model: floor side --------------------------------------------------------

FloorReply = tuple[dict[str, Any], ...]


def floor_tool_reply(call_ids: Sequence[str], name: str = "noop") -> FloorReply:
    """The floor's version of :func:`ms_tool_reply`."""
    deltas: list[dict[str, Any]] = []
    for call_id in call_ids:
        deltas += [
            {"type": "tool_call_start", "id": call_id, "name": name},
            {"type": "tool_call_delta", "id": call_id, "fragment": "{}"},
            {"type": "tool_call_end", "id": call_id},
        ]
    usage = {"type": "usage", "input_tokens": 120, "output_tokens": 12}
    return (*deltas, usage, {"type": "done", "stop_reason": "tool_use"})


def floor_text_reply(pieces: Sequence[str] = ("done",)) -> FloorReply:
    """The floor's version of :func:`ms_text_reply`."""
    usage = {"type": "usage", "input_tokens": 120, "output_tokens": 12}
    texts = tuple({"type": "text", "text": piece} for piece in pieces)
    return (*texts, usage, {"type": "done", "stop_reason": "stop"})
