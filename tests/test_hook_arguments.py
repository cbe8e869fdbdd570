"""Hook implementations get exactly the arguments they name, in any order and selection.

pluggy's contract: an implementation declares a subset of the hookspec's arguments, by
name, in any order; arguments with defaults are passed when the spec has them. The kernel
calls implementations through compiled call plans (a fast path for a leading run of the
spec's arguments, a general path for anything else), so each shape is checked here on
every run-time hook, as ``def`` and as ``async def``.
"""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import AbortSignal, AgentState, Block, ToolCall, ToolResult, hookimpl, tool
from mainspring.testing import faux, scripted_run


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


STEPS = [faux.tool_call("echo", {"text": "x"}), faux.text("done")]


class Shapes:
    """Every run-time hook in unusual shapes: reordered, a non-leading subset, none."""

    def __init__(self) -> None:
        self.seen: dict[str, list[tuple[Any, ...]]] = {}

    def note(self, hook: str, *values: Any) -> None:
        self.seen.setdefault(hook, []).append(values)

    @hookimpl
    def on_event(self, signal: Any, event: Any) -> None:  # reordered
        self.note("on_event", signal, event)

    @hookimpl
    def transform_context(self, agent: Any) -> None:  # a non-leading argument only
        self.note("transform_context", agent)

    @hookimpl
    def convert_to_llm(self) -> None:  # nothing at all
        self.note("convert_to_llm")

    @hookimpl
    def before_tool_call(self, tool: Any, call: Any) -> None:
        self.note("before_tool_call", tool, call)

    @hookimpl
    def after_tool_result(self, result: Any) -> None:  # the second argument alone
        self.note("after_tool_result", result)

    @hookimpl
    def should_stop_after_turn(self, signal: Any, state: Any) -> bool:
        self.note("should_stop_after_turn", signal, state)
        return False

    @hookimpl
    def count_tokens(self, model: Any) -> None:
        self.note("count_tokens", model)


class AsyncShapes(Shapes):
    """The same shapes as ``async def`` (``count_tokens`` is synchronous by contract)."""

    @hookimpl
    async def on_event(self, signal: Any, event: Any) -> None:
        self.note("on_event", signal, event)

    @hookimpl
    async def transform_context(self, agent: Any) -> None:
        self.note("transform_context", agent)

    @hookimpl
    async def convert_to_llm(self) -> None:
        self.note("convert_to_llm")

    @hookimpl
    async def before_tool_call(self, tool: Any, call: Any) -> None:
        self.note("before_tool_call", tool, call)

    @hookimpl
    async def after_tool_result(self, result: Any) -> None:
        self.note("after_tool_result", result)

    @hookimpl
    async def should_stop_after_turn(self, signal: Any, state: Any) -> bool:
        self.note("should_stop_after_turn", signal, state)
        return False


@pytest.mark.parametrize("kind", [Shapes, AsyncShapes])
async def test_each_implementation_gets_the_arguments_it_names(kind: type[Shapes]) -> None:
    plugin = kind()
    run = await scripted_run(STEPS, plugins=[plugin], tools=[echo])
    agent, recorder = run.agent, run.recorder
    seen = plugin.seen

    assert [event for _, event in seen["on_event"]] == recorder.events
    assert all(isinstance(signal, AbortSignal) for signal, _ in seen["on_event"])
    view = agent.view_for(kind.__name__)  # a plugin sees the agent through its own view
    assert seen["transform_context"] == [(view,), (view,)]  # two requests
    assert seen["convert_to_llm"] == [(), ()]
    ((tool_value, call),) = seen["before_tool_call"]
    assert tool_value.name == "echo" and isinstance(call, ToolCall) and call.name == "echo"
    ((result,),) = seen["after_tool_result"]
    assert isinstance(result, ToolResult) and result.content[0].text == "x"
    assert len(seen["should_stop_after_turn"]) == 2
    assert all(
        isinstance(signal, AbortSignal) and isinstance(state, AgentState)
        for signal, state in seen["should_stop_after_turn"]
    )
    assert [model.id for (model,) in seen["count_tokens"]] == ["test", "test"]
    assert agent.last_message.text == "done"


async def test_an_argument_with_a_default_is_passed_when_the_spec_has_it() -> None:
    got: list[Any] = []

    class Defaults:
        @hookimpl
        def on_event(self, event: Any, agent: Any = None, extra: str = "kept") -> None:
            got.append((agent, extra))

    run = await scripted_run([faux.text("hi")], plugins=[Defaults()])
    view = run.agent.view_for("Defaults")
    assert got and all(agent is view and extra == "kept" for agent, extra in got)


async def test_a_replacement_from_a_single_argument_result_filter_is_used() -> None:
    class Redactor:
        @hookimpl
        def after_tool_result(self, result: ToolResult) -> ToolResult:
            return ToolResult("[redacted]")

    run = await scripted_run(STEPS, plugins=[Redactor()], tools=[echo])
    results = [m for m in run.agent.state.messages if m.role == "tool_result"]
    assert [r.content[0].text for r in results] == ["[redacted]"]


async def test_a_reordered_gate_can_block() -> None:
    class Gate:
        @hookimpl
        def before_tool_call(self, args: Any, call: Any) -> Block | None:
            return Block(f"no {call.name} of {args.text}")

    run = await scripted_run(STEPS, plugins=[Gate()], tools=[echo])
    result = next(m for m in run.agent.state.messages if m.role == "tool_result")
    assert result.is_error and result.content[0].text.endswith("no echo of x")


async def test_a_failing_observer_in_the_general_path_is_attributed() -> None:
    class Broken:
        name = "broken-observer"

        @hookimpl
        def on_event(self, agent: Any, event: Any) -> None:
            if event.type == "turn_start":
                raise RuntimeError("boom")

    run = await scripted_run([faux.text("hi")], plugins=[Broken()])
    end = run.recorder.events[-1]
    assert end.type == "agent_end" and end.reason == "error"
    assert "broken-observer" in (end.detail or "") and "boom" in (end.detail or "")
