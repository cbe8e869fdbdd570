"""Any exception from a tool or a hook that is not cancellation is that tool's or hook's failure.

``BaseException`` subclasses included (a custom one, ``GeneratorExit``): the tool gets an
error result, the gate blocks, the filter withholds, the transform is skipped. Only
``KeyboardInterrupt`` and ``SystemExit`` leave ``prompt()``, and only once the run has
settled: every tool call answered and ``agent_end`` sent.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mainspring import Agent, Tool, ToolResult, hookimpl, nonblocking, tool
from mainspring.events import AgentEnd, HookErrorEvent, ToolDecision, ToolExecutionEnd
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


class Custom(BaseException):
    """Not an Exception: the kind of thing a careless plugin raises."""


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def raising_tool(kind: type[BaseException], name: str = "boom") -> Tool:
    async def execute(args: Any, ctx: Any) -> str:
        raise kind("from the tool")

    return Tool(name, "raises", {"type": "object", "properties": {}}, execute)


def make_agent(
    steps: list[Any], *, tools: list[Tool], plugins: list[Any] = ()
) -> tuple[Agent, EventRecorder]:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        autoload=False,
        tools=tools,
        plugins=list(plugins),
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder


@pytest.mark.parametrize("kind", [Custom, GeneratorExit], ids=["custom", "GeneratorExit"])
async def test_a_tool_raising_a_base_exception_gets_an_error_result(
    kind: type[BaseException],
) -> None:
    steps = [faux.tool_call("boom", {}, id="c1"), faux.text("handled")]
    agent, recorder = make_agent(steps, tools=[raising_tool(kind)])

    await asyncio.wait_for(agent.prompt("go"), 10)

    check_event_grammar(recorder.events)
    end = recorder.of_type(ToolExecutionEnd)[0]
    assert end.is_error and kind.__name__ in end.result.text
    assert recorder.of_type(AgentEnd)[0].reason == "stop"
    assert agent.state.messages[-1].text == "handled"


@pytest.mark.parametrize("place", ["in a worker thread", "on the loop"])
@pytest.mark.parametrize("kind", [Custom, GeneratorExit], ids=["custom", "GeneratorExit"])
async def test_a_gate_raising_a_base_exception_blocks_the_call(
    kind: type[BaseException], place: str
) -> None:
    ran: list[str] = []

    @tool
    def guarded(text: str) -> str:
        """Must not run."""
        ran.append(text)
        return text

    class Gate:
        name = "raising-gate"

        @hookimpl
        def before_tool_call(self, call: Any) -> None:
            raise kind("from the gate")

    if place == "on the loop":
        Gate.before_tool_call = hookimpl(nonblocking(Gate.before_tool_call))  # type: ignore[method-assign]
    steps = [faux.tool_call("guarded", {"text": "x"}, id="c1"), faux.text("done")]
    agent, recorder = make_agent(steps, tools=[guarded], plugins=[Gate()])

    await asyncio.wait_for(agent.prompt("go"), 10)

    check_event_grammar(recorder.events)
    assert ran == []
    decision = recorder.of_type(ToolDecision)[0]
    assert (decision.decision, decision.plugin) == ("block", "raising-gate")
    assert recorder.of_type(HookErrorEvent)[0].plugin == "raising-gate"
    results = [m for m in agent.state.messages if m.role == "tool_result"]
    assert [r.tool_call_id for r in results] == ["c1"] and results[0].is_error


async def test_a_result_filter_raising_a_base_exception_withholds_the_result() -> None:
    class Filter:
        name = "raising-filter"

        @hookimpl
        def after_tool_result(self, result: ToolResult) -> None:
            raise Custom("from the filter")

    steps = [faux.tool_call("echo", {"text": "secret"}, id="c1"), faux.text("done")]
    agent, recorder = make_agent(steps, tools=[echo], plugins=[Filter()])

    await agent.prompt("go")

    check_event_grammar(recorder.events)
    end = recorder.of_type(ToolExecutionEnd)[0]
    assert end.is_error and "secret" not in end.result.text
    assert "withheld" in end.result.text


async def test_a_transform_raising_a_base_exception_is_skipped() -> None:
    class Transform:
        name = "raising-transform"

        @hookimpl
        async def transform_context(self, messages: Any) -> None:
            raise Custom("from the transform")

    agent, recorder = make_agent([faux.text("fine")], tools=[], plugins=[Transform()])

    await agent.prompt("go")

    check_event_grammar(recorder.events)
    assert [e.plugin for e in recorder.of_type(HookErrorEvent)] == ["raising-transform"]
    assert recorder.of_type(AgentEnd)[0].reason == "stop"


async def test_a_gate_raising_cancelled_error_by_itself_blocks_the_call() -> None:
    class Gate:
        name = "cancelling-gate"

        @hookimpl
        async def before_tool_call(self, call: Any) -> None:
            raise asyncio.CancelledError

    steps = [faux.tool_call("echo", {"text": "x"}, id="c1"), faux.text("done")]
    agent, recorder = make_agent(steps, tools=[echo], plugins=[Gate()])

    await asyncio.wait_for(agent.prompt("go"), 10)

    check_event_grammar(recorder.events)
    assert recorder.of_type(ToolDecision)[0].decision == "block"
    assert recorder.of_type(AgentEnd)[0].reason == "stop"


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
async def test_an_interrupt_from_a_tool_leaves_prompt_after_the_run_settled(
    kind: type[BaseException],
) -> None:
    steps = [
        faux.reply(
            faux.tool_call("boom", {}, id="c1"),
            faux.tool_call("echo", {"text": "x"}, id="c2"),
        ),
        faux.text("never"),
    ]
    agent, recorder = make_agent(steps, tools=[raising_tool(kind), echo])

    with pytest.raises(kind):
        await agent.prompt("go")  # no wait_for: its task would hand the interrupt to the loop

    check_event_grammar(recorder.events)
    assert recorder.events[-1].type == "agent_end"
    assert recorder.events[-1].reason == "aborted"
    results = [m for m in agent.state.messages if m.role == "tool_result"]
    assert sorted(r.tool_call_id for r in results) == ["c1", "c2"]
    assert not agent.state.is_streaming


async def test_an_interrupt_from_a_hook_leaves_prompt_after_the_run_settled() -> None:
    class Gate:
        name = "interrupting-gate"

        @hookimpl
        def before_tool_call(self, call: Any) -> None:
            raise KeyboardInterrupt

    steps = [faux.tool_call("echo", {"text": "x"}, id="c1"), faux.text("never")]
    agent, recorder = make_agent(steps, tools=[echo], plugins=[Gate()])

    with pytest.raises(KeyboardInterrupt):
        await agent.prompt("go")

    check_event_grammar(recorder.events)
    assert recorder.events[-1].type == "agent_end"
    results = [m for m in agent.state.messages if m.role == "tool_result"]
    assert [r.tool_call_id for r in results] == ["c1"]
