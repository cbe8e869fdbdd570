"""W4: one request over a 2,000-message prior history (``Agent(messages=...)``).

Measured on a fresh agent per repetition (built outside the timing): the CPU time from
``prompt()`` to the provider's ``stream()`` being called (the kernel's request
preparation: events, ``transform_context``, ``convert_to_llm``, invariants, token count,
building the request), and the whole ``prompt()``. The history is 500 blocks of user
question, assistant tool call, tool result, assistant answer. A second variant has
assistant messages without usage, so the built-in token estimate reads every message.
"""

from __future__ import annotations

import time
from typing import Any

from mainspring import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from mainspring.messages import Usage

from .common import (
    USAGE,
    Config,
    Row,
    build_agent,
    floor_text_reply,
    median,
    ms_text_reply,
    noop_tool,
    settle,
)
from .floor import FloorAgent, script

__all__ = ["run_w4"]

MESSAGES = 2_000


def _history(usage: Usage) -> tuple[Any, ...]:
    messages: list[Any] = []
    for i in range(MESSAGES // 4):
        call = ToolCall(id=f"h{i}", name="noop", arguments={"q": i})
        messages += [
            UserMessage(content=f"question {i}: what does the file say?"),
            AssistantMessage(
                content=(TextContent(text="Let me look."), call),
                provider="faux",
                model="bench",
                usage=usage,
                stop_reason="tool_use",
            ),
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name="noop",
                content=(TextContent(text=f"line {i} of the file " * 4),),
                is_error=False,
            ),
            AssistantMessage(
                content=(TextContent(text=f"The file says line {i}."),),
                provider="faux",
                model="bench",
                usage=usage,
                stop_reason="stop",
            ),
        ]
    return tuple(messages)


def _floor_history() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(MESSAGES // 4):
        call = {"id": f"h{i}", "name": "noop", "args": {"q": i}}
        messages += [
            {"role": "user", "content": f"question {i}: what does the file say?"},
            {"role": "assistant", "text": "Let me look.", "tool_calls": [call]},
            {"role": "tool_result", "tool_call_id": call["id"], "content": f"line {i} " * 4},
            {"role": "assistant", "text": f"The file says line {i}.", "tool_calls": []},
        ]
    return messages


_WITH_USAGE = _history(USAGE)
_WITHOUT_USAGE = _history(Usage())
_FLOOR = _floor_history()


async def _mainspring(history: tuple[Any, ...]) -> tuple[float, float]:
    agent, provider = build_agent([ms_text_reply()], tools=[noop_tool()], messages=history)
    settle()
    start = time.process_time()
    await agent.prompt("and now?")
    total = time.process_time() - start
    if len(agent.state.messages) != MESSAGES + 2:
        raise RuntimeError("W4 did not run as scripted")
    return provider.called_at[0] - start, total


async def _floor() -> tuple[float, float]:
    called: list[float] = []
    agent = FloorAgent(script([floor_text_reply()], called), messages=_FLOOR)
    settle()
    start = time.process_time()
    await agent.prompt("and now?")
    total = time.process_time() - start
    return called[0] - start, total


def _ms(value: float) -> str:
    return f"{value * 1e3:.3f} ms"


async def run_w4(config: Config) -> list[Row]:
    """W4 rows: time to the provider call and the total, with and without usage."""
    rows: list[Row] = []
    floor: list[tuple[float, float]] = []
    for label, history in (("", _WITH_USAGE), (", no usage in history", _WITHOUT_USAGE)):
        ms: list[tuple[float, float]] = []
        for rep in range(config.reps + 1):
            one, other = await _mainspring(history), await _floor()
            if rep:
                ms.append(one)
                floor.append(other)
        to_stream, total = median([m[0] for m in ms]), median([m[1] for m in ms])
        floor_stream, floor_total = median([f[0] for f in floor]), median([f[1] for f in floor])
        rows += [
            Row(f"W4 prompt→stream(), 2,000 msgs{label}", _ms(to_stream), _ms(floor_stream),
                to_stream / floor_stream, "≤1 ms", to_stream <= 1e-3),
            Row(f"W4 whole request, 2,000 msgs{label}", _ms(total), _ms(floor_total),
                total / floor_total, "info", None),
        ]  # fmt: skip
    return rows
