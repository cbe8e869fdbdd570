"""Run-level event order: the exact event stream of a text and a tool prompt, seq/run_id/turn.

Every run uses the FauxProvider with a large ``chunk_size`` so that each scripted block
streams as one delta, which makes the number of ``message_update`` events exact:
one per stream event before ``StreamDone`` (the text/tool-call deltas and ``UsageReport``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from pydantic import BaseModel

from mainspring import Agent, AssistantMessage, Tool, ToolResultMessage, UserMessage
from mainspring.events import (
    AgentEnd,
    MessageEnd,
    MessageUpdate,
    PhaseChange,
    ToolDecision,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    event_to_dict,
    event_to_json,
)
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


class ReadArgs(BaseModel):
    path: str


async def _read(args: ReadArgs, ctx: Any) -> str:
    return f"contents of {args.path}"


READ = Tool("read", "Read a file.", ReadArgs, _read)


def make_agent(steps: list[Any], **kwargs: Any) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps, chunk_size=1000)
    agent = Agent(model="faux:test", provider=provider, autoload=False, **kwargs)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder, provider


TEXT_RUN = [
    "agent_start",
    "phase_change",
    "turn_start",
    "message_start",  # user
    "message_end",
    "message_start",  # assistant
    "message_update",  # TextDelta
    "message_update",  # UsageReport
    "message_end",
    "turn_end",
    "phase_change",
    "agent_end",
]


async def test_text_prompt_exact_event_sequence() -> None:
    agent, recorder, _ = make_agent([faux.text("hello")])
    await agent.prompt("hi")

    assert recorder.types() == TEXT_RUN
    check_event_grammar(recorder.events)

    events = recorder.events
    assert isinstance(events[1], PhaseChange)
    assert (events[1].previous, events[1].phase) == ("idle", "turn")
    assert isinstance(events[-2], PhaseChange)
    assert (events[-2].previous, events[-2].phase) == ("turn", "idle")

    user_start, user_end = events[3], events[4]
    assert user_start.message.role == "user" and user_end.message.role == "user"
    assert user_end.message.content == "hi"

    assistant = events[8]
    assert isinstance(assistant, MessageEnd)
    assert isinstance(assistant.message, AssistantMessage)
    assert assistant.message.text == "hello"
    assert assistant.message.stop_reason == "stop"

    updates = recorder.of_type(MessageUpdate)
    assert updates[0].delta.text == "hello"
    assert updates[0].message.text == "hello"

    turn_end = events[9]
    assert isinstance(turn_end, TurnEnd)
    assert turn_end.message == assistant.message
    assert turn_end.tool_results == ()

    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert end.reason == "stop" and end.detail is None
    assert [m.role for m in end.messages] == ["user", "assistant"]
    assert end.messages == agent.state.messages


TOOL_RUN = [
    "agent_start",
    "phase_change",
    "turn_start",
    "message_start",  # user
    "message_end",
    "message_start",  # assistant (tool call)
    "message_update",  # ToolCallStart
    "message_update",  # ToolCallDelta
    "message_update",  # ToolCallEnd
    "message_update",  # UsageReport
    "message_end",
    "tool_execution_start",
    "tool_decision",
    "tool_execution_end",
    "message_start",  # tool_result
    "message_end",
    "turn_end",
    "turn_start",
    "message_start",  # assistant (text)
    "message_update",
    "message_update",
    "message_end",
    "turn_end",
    "phase_change",
    "agent_end",
]


async def test_tool_prompt_exact_event_sequence() -> None:
    agent, recorder, provider = make_agent(
        [faux.tool_call("read", {"path": "a.txt"}, id="c1"), faux.text("It says hi.")],
        tools=[READ],
    )
    await agent.prompt("read a.txt")

    assert recorder.types() == TOOL_RUN
    check_event_grammar(recorder.events)

    first_reply = recorder.messages("assistant")[0]
    assert first_reply.stop_reason == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in first_reply.tool_calls] == [
        ("c1", "read", {"path": "a.txt"})
    ]

    (start,) = recorder.of_type(ToolExecutionStart)
    assert (start.tool_call_id, start.tool_name, start.args) == ("c1", "read", {"path": "a.txt"})
    (decision,) = recorder.of_type(ToolDecision)
    assert (decision.tool_call_id, decision.decision, decision.plugin) == ("c1", "allow", None)
    (end,) = recorder.of_type(ToolExecutionEnd)
    assert end.tool_call_id == "c1" and end.is_error is False
    assert end.result.text == "contents of a.txt"

    (result,) = recorder.messages("tool_result")
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_call_id, result.tool_name, result.is_error) == ("c1", "read", False)
    assert result.text == "contents of a.txt"

    turn_ends = recorder.of_type(TurnEnd)
    assert [t.turn for t in turn_ends] == [0, 1]
    assert turn_ends[0].message == first_reply
    assert turn_ends[0].tool_results == (result,)
    assert turn_ends[1].message.text == "It says hi."
    assert turn_ends[1].tool_results == ()

    # the second request carried the whole transcript so far, tool result included
    assert len(provider.requests) == 2
    assert [m.role for m in provider.requests[1].messages] == ["user", "assistant", "tool_result"]
    assert [m.role for m in agent.state.messages] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
    ]
    (agent_end,) = recorder.of_type(AgentEnd)
    assert agent_end.messages == agent.state.messages


async def test_seq_has_no_gaps_across_two_runs_and_run_id_differs() -> None:
    agent, recorder, _ = make_agent(
        [faux.text("one"), faux.tool_call("read", {"path": "x"}), faux.text("two")],
        tools=[READ],
    )
    await agent.prompt("first")
    first_count = len(recorder.events)
    await agent.prompt("second")
    check_event_grammar(recorder.events)

    seqs = [event.seq for event in recorder.events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))

    first_run = {event.run_id for event in recorder.events[:first_count]}
    second_run = {event.run_id for event in recorder.events[first_count:]}
    assert len(first_run) == 1 and len(second_run) == 1
    assert first_run != second_run
    assert all(run_id for run_id in first_run | second_run)
    assert recorder.types().count("agent_start") == 2


async def test_seq_continues_when_recorder_subscribes_late() -> None:
    agent, _, _ = make_agent([faux.text("one"), faux.text("two")])
    await agent.prompt("first")
    late = EventRecorder()
    agent.subscribe(late)
    await agent.prompt("second")
    check_event_grammar(late.events)
    # the per-agent counter kept counting during the first run
    assert late.events[0].seq > len(TEXT_RUN) - 1


async def test_turn_is_none_outside_turns_and_indexed_inside() -> None:
    agent, recorder, _ = make_agent(
        [faux.tool_call("read", {"path": "x"}), faux.text("done")], tools=[READ]
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)

    current: int | None = None
    for event in recorder.events:
        if event.type == "turn_start":
            current = event.turn
        if event.type in ("agent_start", "agent_end", "phase_change"):
            assert event.turn is None, event
        else:
            assert event.turn == current, event
        if event.type == "turn_end":
            current = None
    starts = [e.turn for e in recorder.events if e.type == "turn_start"]
    assert starts == [0, 1]
    tool_events = [e for e in recorder.events if e.type.startswith("tool_")]
    assert tool_events and all(e.turn == 0 for e in tool_events)


async def test_turn_index_restarts_at_zero_in_each_run() -> None:
    agent, recorder, _ = make_agent(
        [faux.tool_call("read", {"path": "x"}), faux.text("a"), faux.text("b")], tools=[READ]
    )
    await agent.prompt("one")
    await agent.prompt("two")
    check_event_grammar(recorder.events)
    assert [e.turn for e in recorder.of_type("turn_start")] == [0, 1, 0]


async def test_message_updates_reassemble_the_streamed_text() -> None:
    provider = FauxProvider(
        [[faux.thinking("let me see"), faux.text("The quick brown fox.")]], chunk_size=3
    )
    agent = Agent(model="faux:test", provider=provider, autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)

    updates = recorder.of_type(MessageUpdate)
    text = "".join(u.delta.text for u in updates if u.delta.type == "text_delta")
    thinking = "".join(u.delta.text for u in updates if u.delta.type == "thinking_delta")
    assert text == "The quick brown fox."
    assert thinking == "let me see"
    # each partial message grows monotonically and the last one equals the final text
    partial_texts = [u.message.text for u in updates]
    assert all(a == b[: len(a)] for a, b in itertools.pairwise(partial_texts))
    final = recorder.messages("assistant")[-1]
    assert final.text == "The quick brown fox."
    assert [block.type for block in final.content] == ["thinking", "text"]


async def test_every_event_of_a_run_is_json_serialisable() -> None:
    agent, recorder, _ = make_agent(
        [faux.tool_call("read", {"path": "x"}), faux.text("done")], tools=[READ]
    )
    await agent.prompt(UserMessage(content="go"))
    check_event_grammar(recorder.events)
    for event in recorder.events:
        line = event_to_json(event)
        assert "\n" not in line
        data = json.loads(line)
        assert data["type"] == event.type
        assert data["seq"] == event.seq
        assert data["run_id"] == event.run_id
        assert data == json.loads(json.dumps(event_to_dict(event)))
    # the JSON form passes the grammar checker too
    check_event_grammar([json.loads(event_to_json(e)) for e in recorder.events])


async def test_agent_end_messages_are_only_the_new_messages_of_the_run() -> None:
    agent, recorder, _ = make_agent([faux.text("one"), faux.text("two")])
    await agent.prompt("first")
    await agent.prompt("second")
    ends = recorder.of_type(AgentEnd)
    assert [m.role for m in ends[1].messages] == ["user", "assistant"]
    assert ends[1].messages[0].content == "second"
    assert ends[0].messages + ends[1].messages == agent.state.messages
    check_event_grammar(recorder.events)


async def test_prompt_with_a_list_of_messages_emits_each_in_the_first_turn() -> None:
    agent, recorder, _ = make_agent([faux.text("ok")])
    await agent.prompt([UserMessage(content="a"), UserMessage(content="b")])
    check_event_grammar(recorder.events)
    assert recorder.types()[:7] == [
        "agent_start",
        "phase_change",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
    ]
    assert [m.content for m in recorder.messages("user")] == ["a", "b"]
