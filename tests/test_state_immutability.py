"""State and events are frozen values, and the state is updated before listeners see the
event that changed it (DESIGN §4, §5, §14)."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from mainspring import Agent, AgentState, Tool, ToolContext, ToolResult, UserMessage
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


class PathArgs(BaseModel):
    path: str


def make_agent(
    steps: list[Any], *, tools: list[Tool] | tuple[Tool, ...] = ()
) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps)
    agent = Agent(model="faux:test", provider=provider, autoload=False, tools=tools)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder, provider


def read_tool(executed: list[str]) -> Tool:
    async def read(args: PathArgs, ctx: ToolContext) -> str:
        executed.append(args.path)
        return f"read {args.path}"

    return Tool("read", "read", PathArgs, read)


# ------------------------------------------------------------------ frozen values


async def test_agent_state_cannot_be_assigned() -> None:
    agent, recorder, _ = make_agent(["hello"])
    await agent.prompt("hi")
    state = agent.state
    assert isinstance(state, AgentState)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.messages = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.is_streaming = True  # type: ignore[misc]
    with pytest.raises(AttributeError):
        agent.state = state  # type: ignore[misc]
    assert isinstance(state.messages, tuple)
    with pytest.raises(AttributeError):
        state.messages.append(UserMessage(content="sneaky"))  # type: ignore[attr-defined]
    assert isinstance(state.pending_tool_calls, frozenset)
    assert isinstance(state.steering_queue, tuple)
    assert isinstance(state.follow_up_queue, tuple)
    assert len(agent.state.messages) == 2
    check_event_grammar(recorder.events)


async def test_a_snapshot_does_not_change_when_the_agent_does() -> None:
    agent, recorder, _ = make_agent(["one", "two"])
    await agent.prompt("first")
    before = agent.state
    await agent.prompt("second")
    assert len(before.messages) == 2
    assert len(agent.state.messages) == 4
    check_event_grammar(recorder.events)


async def test_events_cannot_be_assigned() -> None:
    agent, recorder, _ = make_agent(
        [faux.tool_call("read", {"path": "a"}), "done"], tools=[read_tool([])]
    )
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    for event in recorder.events:
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.seq = 0  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.turn = 99  # type: ignore[misc]
    end = recorder.of_type("agent_end")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        end.reason = "error"  # type: ignore[misc]
    assert isinstance(end.messages, tuple)
    turn_end = recorder.of_type("turn_end")[0]
    assert isinstance(turn_end.tool_results, tuple)


async def test_messages_and_results_cannot_be_assigned() -> None:
    agent, recorder, _ = make_agent(
        [faux.tool_call("read", {"path": "a"}), "done"], tools=[read_tool([])]
    )
    await agent.prompt("hi")
    user, call_message, result, reply = agent.state.messages
    with pytest.raises(ValidationError):
        user.content = "rewritten"
    with pytest.raises(ValidationError):
        reply.stop_reason = "error"
    with pytest.raises(ValidationError):
        result.is_error = True
    with pytest.raises(ValidationError):
        call_message.tool_calls[0].name = "rm"
    assert isinstance(call_message.content, tuple)
    end = recorder.of_type("tool_execution_end")[0]
    assert isinstance(end.result, ToolResult)
    with pytest.raises(ValidationError):
        end.result.is_error = True
    check_event_grammar(recorder.events)


async def test_a_listener_cannot_change_the_arguments_a_tool_runs_with() -> None:
    """Subscribers cannot change the transcript (§4): mutating a tool call's arguments
    dict seen in an event must neither reach the tool nor the transcript."""
    executed: list[str] = []
    agent, recorder, provider = make_agent(
        [faux.tool_call("read", {"path": "notes.txt"}, id="c1"), "done"],
        tools=[read_tool(executed)],
    )
    refused: list[str] = []

    def tamper(event: Any, signal: Any) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            for call in event.message.tool_calls:
                try:
                    call.arguments["path"] = "/etc/shadow"
                except TypeError:
                    refused.append(call.id)

    agent.subscribe(tamper)
    await agent.prompt("read my notes")
    check_event_grammar(recorder.events)
    assert executed == ["notes.txt"], f"the listener changed what the tool ran: {executed}"
    (call,) = agent.state.messages[1].tool_calls
    assert call.arguments == {"path": "notes.txt"}
    sent = provider.requests[1].messages[1]
    assert sent.tool_calls[0].arguments == {"path": "notes.txt"}


async def test_mutating_tool_execution_start_args_changes_nothing() -> None:
    executed: list[str] = []
    agent, recorder, _ = make_agent(
        [faux.tool_call("read", {"path": "notes.txt"}), "done"], tools=[read_tool(executed)]
    )

    def tamper(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_start":
            with contextlib.suppress(TypeError):
                event.args["path"] = "/etc/shadow"

    agent.subscribe(tamper)
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert executed == ["notes.txt"]
    assert agent.state.messages[1].tool_calls[0].arguments == {"path": "notes.txt"}


# ------------------------------------------------------------------ state before listeners


async def test_state_is_updated_before_listeners_see_each_event() -> None:
    executed: list[str] = []
    agent, recorder, _ = make_agent(
        [faux.tool_call("read", {"path": "a"}, id="c1"), "done"], tools=[read_tool(executed)]
    )
    problems: list[str] = []
    checked: set[str] = set()

    def check(event: Any, signal: Any) -> None:
        state = agent.state
        checked.add(event.type)

        def expect(condition: bool, what: str) -> None:
            if not condition:
                problems.append(f"#{event.seq} {event.type}: {what}")

        expect(state.is_streaming, "is_streaming is False during the run")
        if event.type == "agent_start":
            expect(state.run_id == event.run_id, "run_id not set")
        if event.type == "phase_change":
            expect(state.phase == event.phase, f"phase is {state.phase}")
        if event.type in ("turn_start", "message_start", "tool_execution_start"):
            expect(state.turn == event.turn, f"state.turn={state.turn} event.turn={event.turn}")
        if event.type == "message_end":
            expect(state.messages[-1] == event.message, "message not yet in the transcript")
        if event.type == "message_update":
            expect(state.streaming_message == event.message, "streaming_message is stale")
        if event.type == "tool_execution_start":
            expect(event.tool_call_id in state.pending_tool_calls, "id not pending")
        if event.type == "tool_execution_end":
            expect(event.tool_call_id not in state.pending_tool_calls, "id still pending")
        if event.type == "turn_end" and event.message is not None:
            expect(event.message in state.messages, "turn message not in transcript")
        if event.type == "agent_end":
            expect(state.phase == "idle", f"phase is {state.phase} at agent_end")
            expect(state.messages[-len(event.messages) :] == event.messages, "messages differ")
            expect(state.pending_tool_calls == frozenset(), "calls still pending")
            expect(state.streaming_message is None, "still streaming a message")

    agent.subscribe(check)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assert problems == []
    assert {
        "agent_start",
        "phase_change",
        "turn_start",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "turn_end",
        "agent_end",
    } <= checked


async def test_streaming_message_is_none_once_the_message_ended() -> None:
    agent, recorder, _ = make_agent(["hello world"])
    at_end: list[Any] = []

    def listener(event: Any, signal: Any) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            at_end.append(agent.state.streaming_message)

    agent.subscribe(listener)
    await agent.prompt("hi")
    assert at_end == [None]
    assert agent.state.streaming_message is None
    check_event_grammar(recorder.events)


async def test_pending_tool_calls_is_empty_after_the_run() -> None:
    agent, recorder, _ = make_agent(
        [[faux.tool_call("read", {"path": "a"}), faux.tool_call("nope", {})], "done"],
        tools=[read_tool([])],
    )
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assert agent.state.pending_tool_calls == frozenset()
    assert agent.state.phase == "idle"
    assert agent.state.run_id is None
    assert agent.state.turn is None


def test_partial_messages_built_on_the_hot_path_equal_validated_ones() -> None:
    from mainspring.messages import TextContent as Text
    from mainspring.messages import trusted_construct

    fast = trusted_construct(Text, {"type": "text", "text": "hi"})
    slow = Text(text="hi")
    assert fast == slow
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_copy(update={"text": "x"}) == Text(text="x")
    with pytest.raises(ValidationError):
        fast.text = "changed"  # type: ignore[misc]
