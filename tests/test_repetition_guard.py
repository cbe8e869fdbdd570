"""The repetition guard: which texts count as looping, and a looping reply ends the run
with ``stop_reason="repetition"``, its tool calls unrun, through the normal events."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import run_cli
from mainspring import Agent, AssistantMessage, ToolResult, tool
from mainspring.providers import ModelRequest, StreamEvent
from mainspring.providers.repetition import RepetitionGuard, stop_repetition
from mainspring.signal import AbortSignal
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

LOOPING_PATH = "```\n/Users/me/Desktop" + "/Moose-2023-02-22" * 80
NUMBERED_LOOP = "".join(f"{n}. notes.txt\n" for n in range(1, 60))
COLOURS = (
    "1. Red: This is the most obvious colour, but it's also the most versatile. Red is a "
    "colour that can be used to create a wide range of effects, from vibrant colors to bold "
    "markings.\n\n2. Blue: This colour is often associated with the sky, but it can also be "
    "used to create a range of effects, from vibrant colors to intricate patterns.\n\n"
    "3. Green: This colour is often associated with nature, but it can also be used to "
    "create a range of effects, from vibrant colors to intricate patterns.\n\nThese are just "
    "a few examples of the many colours that exist."
)


def _fed_in_pieces(text: str, size: int = 5, guard: RepetitionGuard | None = None) -> int | None:
    """Feed ``text`` in ``size``-character pieces; the offset where the guard fired."""
    guard = guard or RepetitionGuard()
    for start in range(0, len(text), size):
        if guard.feed(text[start : start + size]):
            return start + size
    return None


def test_a_path_looping_is_caught_early() -> None:
    fired = _fed_in_pieces(LOOPING_PATH)
    assert fired is not None
    assert (
        fired < 500
    )  # 240 normalised characters of repetition, checked every 16: long before the end
    assert len(LOOPING_PATH) > 1300


def test_numbered_items_that_repeat_are_caught() -> None:
    assert _fed_in_pieces(NUMBERED_LOOP) is not None


@pytest.mark.parametrize(
    "text",
    [
        COLOURS,
        "It was the best of times, it was the worst of times. " * 2,  # said twice
        "| name | size |\n|------|------|\n| a.txt | 12 |\n| b.txt | 7 |\n",
        "=" * 80 + "\nTitle\n" + "=" * 80,
        "".join(f"{n}. {name}\n" for n, name in enumerate(["alpha", "beta", "gamma", "delta"])),
    ],
    ids=["prose", "sentence-twice", "table", "rules", "distinct-items"],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert _fed_in_pieces(text) is None
    assert _fed_in_pieces(text, size=1) is None


def test_the_limits_are_configurable_and_checked() -> None:
    text = "abc" * 30  # 90 characters of one unit
    assert _fed_in_pieces(text) is None
    strict = RepetitionGuard(min_span=60, min_repeats=3, max_period=10)
    assert _fed_in_pieces(text, guard=strict) is not None
    assert strict.period == 3
    with pytest.raises(ValueError, match="min_repeats >= 2"):
        RepetitionGuard(min_repeats=1)


class GuardedFaux(FauxProvider):
    """The scripted provider behind the guard, the way the local provider wraps its server."""

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncIterator[StreamEvent]:
        upstream = super().stream(request, signal)
        try:
            async for event in stop_repetition(upstream, RepetitionGuard()):
                yield event
        finally:
            await upstream.aclose()  # type: ignore[attr-defined]


ran: list[str] = []


@tool
def list_files(path: str) -> str:
    """List a directory."""
    ran.append(path)
    return "a.txt"


async def _run(*steps: Any) -> tuple[Agent, EventRecorder]:
    agent = Agent(
        model="faux:x", provider=GuardedFaux(list(steps), chunk_size=6), tools=[list_files]
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("List the files in this directory")
    return agent, recorder


async def test_a_looping_reply_ends_the_run_with_stop_reason_repetition() -> None:
    agent, recorder = await _run(faux.reply(faux.text(LOOPING_PATH)))
    check_event_grammar(recorder.events)
    reply = agent.last_message
    assert isinstance(reply, AssistantMessage)
    assert reply.stop_reason == "repetition"
    assert reply.text.startswith("```\n/Users/me/Desktop/Moose-2023-02-22")
    assert len(reply.text) < 500 < len(LOOPING_PATH)  # stopped soon after the loop began
    end = recorder.of_type("agent_end")[-1]
    assert end.reason == "stop"


async def test_a_tool_call_whose_arguments_loop_is_not_run() -> None:
    ran.clear()
    looping = {"path": "/Moose-2023-02-22" * 40}
    agent, recorder = await _run(faux.reply(faux.tool_call("list_files", looping)))
    check_event_grammar(recorder.events)
    assert ran == []
    reply = next(m for m in agent.state.messages if isinstance(m, AssistantMessage))
    assert reply.stop_reason == "repetition"
    results = recorder.of_type("tool_execution_end")
    assert len(results) == 1 and results[0].is_error
    assert isinstance(results[0].result, ToolResult)
    assert "repeated itself (stop_reason=repetition)" in results[0].result.text


LOOP_PLUGIN = f"""
from collections.abc import AsyncIterator
from mainspring import hookimpl
from mainspring.providers.repetition import RepetitionGuard, stop_repetition
from mainspring.testing import FauxProvider, faux

name = "loop"

class Guarded(FauxProvider):
    async def stream(self, request, signal):
        async for event in stop_repetition(super().stream(request, signal), RepetitionGuard()):
            yield event

@hookimpl
def register_providers():
    return [Guarded([faux.reply(faux.text({LOOPING_PATH!r}))], name="loop")]
"""


def test_the_command_line_says_the_reply_repeated_itself_and_exits_3(tmp_path: Path) -> None:
    (tmp_path / "loop_plugin.py").write_text(LOOP_PLUGIN)
    env = dict(os.environ, MAINSPRING_DISABLE_PLUGIN_AUTOLOAD="1")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    done = run_cli(["run", "list", "--plugin", "loop_plugin", "--model", "loop:x"], env)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("```\n/Users/me/Desktop/Moose-2023-02-22")
    assert (
        "the reply was cut off because it had started to repeat itself (stop_reason=repetition)"
        in done.stderr
    )
