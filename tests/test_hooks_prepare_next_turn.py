"""prepare_next_turn: change what the rest of a run sends, between turns.

Hook table: before each follow-up model request (after a turn with tool results, before a
steering or follow-up turn), never before the first; a ``NextTurn`` swaps the context
(the transcript keeps every message), the system prompt, the model or the thinking level
for the rest of the run; the agent's configuration is unchanged. Failure: skipped with a
``hook_error``; nothing of a failed change applies; the next implementation is called.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mainspring import (
    Model,
    NextTurn,
    Settings,
    StopRun,
    ToolResultMessage,
    UserMessage,
    hookimpl,
    tool,
)
from mainspring.settings import HookSettings
from mainspring.testing import faux, scripted_run


@tool
def shell(command: str) -> str:
    """Run a command (pretend)."""
    return f"ran {command}"


TWO_CALLS = [
    faux.tool_call("shell", {"command": "ls"}),
    faux.tool_call("shell", {"command": "pwd"}),
    faux.text("done"),
]


def texts(request: Any) -> list[str]:
    return [getattr(m, "text", "") or m.role for m in request.messages]


class Recorder:
    """Records each call's state; returns what ``answer(call_index)`` gives."""

    def __init__(self, answer: Any = None) -> None:
        self.states: list[Any] = []
        self.answer = answer

    @hookimpl
    def prepare_next_turn(self, state, agent, signal):
        self.states.append(state)
        return self.answer(len(self.states) - 1) if self.answer else None


async def test_called_before_each_follow_up_request_only() -> None:
    recorder = Recorder()
    run = await scripted_run(TWO_CALLS, plugins=[recorder], tools=[shell])
    assert len(run.provider.requests) == 3
    assert len(recorder.states) == 2  # not before the first request, not after the last
    assert recorder.states[0].messages[-1].role == "tool_result"
    kinds = [e.type for e in run.recorder.events]
    # outside any turn: between a turn_end and the next turn_start
    assert kinds.count("turn_start") == 3

    text_only = Recorder()
    await scripted_run([faux.text("hi")], plugins=[text_only])
    assert text_only.states == []


async def test_called_before_a_follow_up_turn() -> None:
    recorder = Recorder()

    def before(agent: Any) -> None:
        agent.follow_up("and then?")

    run = await scripted_run(
        [faux.text("first"), faux.text("second")], plugins=[recorder], before=before
    )
    assert len(run.provider.requests) == 2
    assert len(recorder.states) == 1


async def test_a_swapped_context_is_what_the_rest_of_the_run_sends() -> None:
    summary = UserMessage(content="summary of everything so far")
    recorder = Recorder(lambda index: NextTurn(messages=[summary]) if index == 0 else None)
    run = await scripted_run(TWO_CALLS, plugins=[recorder], tools=[shell])

    first, second, third = run.provider.requests
    assert texts(first) == ["go"]
    assert texts(second) == ["summary of everything so far"]
    # the second turn's messages come after the swapped context
    assert texts(third)[0] == "summary of everything so far"
    assert [m.role for m in third.messages] == ["user", "assistant", "tool_result"]
    # the transcript keeps every message
    roles = [m.role for m in run.agent.state.messages]
    assert roles == ["user", "assistant", "tool_result", "assistant", "tool_result", "assistant"]


async def test_model_system_prompt_and_thinking_level_hold_for_the_rest_of_the_run() -> None:
    other = Model(provider="faux", id="other")
    recorder = Recorder(
        lambda index: (
            NextTurn(model=other, system_prompt="be terse", thinking_level="low")
            if index == 0
            else None
        )
    )
    run = await scripted_run(TWO_CALLS, plugins=[recorder], tools=[shell], system_prompt="hi")
    got = [(r.model.id, r.system_prompt, r.thinking_level) for r in run.provider.requests]
    assert got == [
        ("test", "hi", "off"),
        ("other", "be terse", "low"),
        ("other", "be terse", "low"),
    ]
    state = run.agent.state
    assert (state.model.id, state.system_prompt, state.thinking_level) == ("test", "hi", "off")
    (end,) = run.recorder.of_type("agent_end")
    assert end.messages[-1].model == "other"  # the reply came from the swapped model


async def test_a_model_given_by_name_is_resolved() -> None:
    recorder = Recorder(lambda index: NextTurn(model="faux:named"))
    run = await scripted_run(TWO_CALLS, plugins=[recorder], tools=[shell])
    assert [r.model.id for r in run.provider.requests] == ["test", "named", "named"]


class Later:
    """A second implementation that always swaps the thinking level."""

    @hookimpl(trylast=True)
    def prepare_next_turn(self):
        return NextTurn(thinking_level="minimal")


async def _never() -> None:
    await asyncio.Event().wait()


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (lambda i: 1 / 0, "ZeroDivisionError"),
        (lambda i: "high", "returned a str, not a NextTurn"),
        (lambda i: NextTurn(messages="text"), "gave messages as a str"),
        (
            lambda i: NextTurn(messages=[ToolResultMessage(tool_call_id="x", tool_name="shell")]),
            "broke the transcript",
        ),
        (lambda i: NextTurn(thinking_level="max"), "thinking_level must be one of"),
        (lambda i: NextTurn(model="nowhere:model"), 'unknown provider "nowhere"'),
        (lambda i: NextTurn(model=42), "model must be a Model"),
        (lambda i: NextTurn(system_prompt=3), "system_prompt must be a str"),
        # nothing of a change applies when one part of it is wrong
        (
            lambda i: NextTurn(messages=[UserMessage(content="x")], model="nowhere:m"),
            "unknown provider",
        ),
    ],
)
async def test_a_failure_is_skipped_with_a_hook_error(answer: Any, error: str) -> None:
    run = await scripted_run(TWO_CALLS, plugins=[Recorder(answer), Later()], tools=[shell])
    errors = run.recorder.of_type("hook_error")
    assert len(errors) == 2  # once per follow-up request
    assert all(e.hook == "prepare_next_turn" and error in e.error for e in errors)
    assert all(e.turn is None and "skipped" in e.outcome for e in errors)
    requests = run.provider.requests
    assert [texts(r)[0] for r in requests] == ["go"] * 3  # the context is unchanged
    assert [r.model.id for r in requests] == ["test"] * 3
    # the next implementation was still called and applied
    assert [r.thinking_level for r in requests] == ["off", "minimal", "minimal"]


async def test_a_hanging_implementation_times_out_and_is_skipped() -> None:
    class Hangs:
        @hookimpl
        async def prepare_next_turn(self):
            await _never()

    settings = Settings(hooks=HookSettings(timeout_s=0.05))
    steps = [faux.tool_call("shell", {"command": "ls"}), faux.text("done")]
    run = await scripted_run(steps, plugins=[Hangs()], tools=[shell], settings=settings)
    (error,) = run.recorder.of_type("hook_error")
    assert "timed out" in error.error
    assert run.recorder.of_type("agent_end")[0].reason == "stop"


async def test_stop_run_ends_the_run() -> None:
    class Stops:
        @hookimpl
        def prepare_next_turn(self):
            raise StopRun("enough")

    run = await scripted_run(TWO_CALLS, plugins=[Stops()], tools=[shell])
    (end,) = run.recorder.of_type("agent_end")
    assert (end.reason, end.detail) == ("stopped_by_hook", "enough")
    assert len(run.provider.requests) == 1


async def test_not_called_after_a_terminating_batch_or_a_stop() -> None:
    class StopAfterFirst:
        @hookimpl
        def should_stop_after_turn(self):
            return True

    recorder = Recorder()
    await scripted_run(TWO_CALLS, plugins=[recorder, StopAfterFirst()], tools=[shell])
    assert recorder.states == []
