"""Steering and follow-up queues (DESIGN §10) and resume() (§15)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from mainspring import Agent, Tool, ToolContext, UserMessage
from mainspring.events import AgentEnd
from mainspring.settings import Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


def make_agent(
    steps: list[Any],
    *,
    tools: list[Tool] | tuple[Tool, ...] = (),
    settings: Settings | None = None,
    messages: tuple[Any, ...] = (),
) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps, chunk_size=1000)
    agent = Agent(
        model="faux:test",
        provider=provider,
        autoload=False,
        tools=tools,
        settings=settings,
        messages=messages,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder, provider


def turns(recorder: EventRecorder) -> list[list[tuple[str, str]]]:
    """Per turn, the (role, text) of every message that ended in it."""
    result: list[list[tuple[str, str]]] = []
    for event in recorder.events:
        if event.type == "turn_start":
            result.append([])
        elif event.type == "message_end":
            message = event.message
            text = message.content if isinstance(message.content, str) else message.text
            result[-1].append((message.role, text))
    return result


def contents(messages: tuple[Any, ...]) -> list[str]:
    return [m.content for m in messages]


class NoArgs(BaseModel):
    pass


# ------------------------------------------------------------------ steering


async def test_steer_before_prompt_joins_the_first_turn_right_after_the_prompt() -> None:
    agent, recorder, provider = make_agent(["ok"])
    agent.steer("and be brief")
    assert contents(agent.state.steering_queue) == ["and be brief"]

    await agent.prompt("explain")
    check_event_grammar(recorder.events)
    assert recorder.types()[:9] == [
        "agent_start",
        "phase_change",
        "turn_start",
        "message_start",
        "message_end",  # the prompt
        "message_start",
        "message_end",  # the steering message
        "message_start",
        "message_update",
    ]
    assert turns(recorder) == [[("user", "explain"), ("user", "and be brief"), ("assistant", "ok")]]
    assert [m.content for m in provider.requests[0].messages] == ["explain", "and be brief"]
    assert agent.state.steering_queue == ()


async def test_steer_during_a_tool_batch_is_delivered_after_all_its_results() -> None:
    seen_queue: list[tuple[str, ...]] = []

    async def steerer(args: NoArgs, ctx: ToolContext) -> str:
        agent.steer("change of plan")
        return "steered"

    async def slow(args: NoArgs, ctx: ToolContext) -> str:
        await asyncio.sleep(0.05)
        seen_queue.append(tuple(contents(agent.state.steering_queue)))
        return "slow done"

    agent, recorder, provider = make_agent(
        [
            [faux.tool_call("steerer", {}, id="s"), faux.tool_call("slow", {}, id="w")],
            "ok, new plan",
        ],
        tools=[Tool("steerer", "steers", NoArgs, steerer), Tool("slow", "slow", NoArgs, slow)],
    )
    await agent.prompt("start")
    check_event_grammar(recorder.events)

    # the slow tool still ran, and saw the queued message while it did
    assert seen_queue == [("change of plan",)]
    types = recorder.types()
    first_reply_end = next(
        i
        for i, e in enumerate(recorder.events)
        if e.type == "message_end" and e.message.role == "assistant"
    )
    assert types[first_reply_end:] == [
        "message_end",  # assistant, tool_use
        "tool_execution_start",  # s
        "tool_decision",
        "tool_execution_start",  # w
        "tool_decision",
        "tool_execution_end",  # s
        "tool_execution_end",  # w
        "message_start",  # tool_result s
        "message_end",
        "message_start",  # tool_result w
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",  # the steering message, first in the next turn
        "message_end",
        "message_start",  # the assistant reply
        "message_update",
        "message_update",
        "message_end",
        "turn_end",
        "phase_change",
        "agent_end",
    ]
    assert turns(recorder) == [
        [
            ("user", "start"),
            ("assistant", ""),
            ("tool_result", "steered"),
            ("tool_result", "slow done"),
        ],
        [("user", "change of plan"), ("assistant", "ok, new plan")],
    ]
    assert [m.role for m in provider.requests[1].messages] == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "user",
    ]
    assert agent.state.steering_queue == ()
    assert len(recorder.of_type("agent_start")) == 1


async def test_steer_while_the_final_reply_streams_adds_a_turn() -> None:
    agent, recorder, _ = make_agent(["first answer", "second answer"])
    steered: list[bool] = []

    def steer_once(event: Any, signal: Any) -> None:
        if event.type == "message_update" and not steered:
            steered.append(True)
            agent.steer("wait, one more thing")

    agent.subscribe(steer_once)
    await agent.prompt("q")
    check_event_grammar(recorder.events)
    assert turns(recorder) == [
        [("user", "q"), ("assistant", "first answer")],
        [("user", "wait, one more thing"), ("assistant", "second answer")],
    ]


async def test_steering_one_at_a_time_delivers_one_message_per_turn() -> None:
    agent, recorder, provider = make_agent(["r1", "r2"])
    agent.steer("s1")
    agent.steer("s2")
    await agent.prompt("p")
    check_event_grammar(recorder.events)
    assert turns(recorder) == [
        [("user", "p"), ("user", "s1"), ("assistant", "r1")],
        [("user", "s2"), ("assistant", "r2")],
    ]
    assert len(provider.requests) == 2


async def test_steering_mode_all_delivers_the_whole_queue_at_once() -> None:
    agent, recorder, provider = make_agent(["r1"], settings=Settings(steering_mode="all"))
    agent.steer("s1")
    agent.steer(UserMessage(content="s2"))
    await agent.prompt("p")
    check_event_grammar(recorder.events)
    assert turns(recorder) == [[("user", "p"), ("user", "s1"), ("user", "s2"), ("assistant", "r1")]]
    assert len(provider.requests) == 1


async def test_steering_is_delivered_before_follow_ups() -> None:
    agent, recorder, _ = make_agent(["r1", "r2", "r3"])
    agent.follow_up("F")
    steered: list[bool] = []

    def steer_in_first_turn(event: Any, signal: Any) -> None:
        if event.type == "message_update" and not steered:
            steered.append(True)
            agent.steer("S")

    agent.subscribe(steer_in_first_turn)
    await agent.prompt("p")
    check_event_grammar(recorder.events)
    assert turns(recorder) == [
        [("user", "p"), ("assistant", "r1")],
        [("user", "S"), ("assistant", "r2")],
        [("user", "F"), ("assistant", "r3")],
    ]


# ------------------------------------------------------------------ follow-up


async def test_follow_up_is_delivered_only_when_the_agent_would_stop() -> None:
    async def noop(args: NoArgs, ctx: ToolContext) -> str:
        return "nothing"

    agent, recorder, _ = make_agent(
        [faux.tool_call("noop", {}), "first answer", "follow-up answer"],
        tools=[Tool("noop", "noop", NoArgs, noop)],
    )
    agent.follow_up("and then?")
    await agent.prompt("start")
    check_event_grammar(recorder.events)
    assert turns(recorder) == [
        [("user", "start"), ("assistant", ""), ("tool_result", "nothing")],
        [("assistant", "first answer")],
        [("user", "and then?"), ("assistant", "follow-up answer")],
    ]
    # new turns of the same run
    assert len(recorder.of_type("agent_start")) == 1
    assert len(recorder.of_type("agent_end")) == 1
    assert agent.state.follow_up_queue == ()


async def test_follow_up_queued_during_the_run_extends_it() -> None:
    async def queue_it(args: NoArgs, ctx: ToolContext) -> str:
        agent.follow_up("queued from a tool")
        assert contents(agent.state.follow_up_queue) == ["queued from a tool"]
        return "queued"

    agent, recorder, _ = make_agent(
        [faux.tool_call("queue_it", {}), "done", "follow-up done"],
        tools=[Tool("queue_it", "queues", NoArgs, queue_it)],
    )
    await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert turns(recorder)[-1] == [("user", "queued from a tool"), ("assistant", "follow-up done")]
    assert len(recorder.of_type("agent_start")) == 1


@pytest.mark.parametrize(
    ("mode", "expected_turns"),
    [
        (
            "one-at-a-time",
            [
                [("user", "p"), ("assistant", "r1")],
                [("user", "f1"), ("assistant", "r2")],
                [("user", "f2"), ("assistant", "r3")],
            ],
        ),
        (
            "all",
            [
                [("user", "p"), ("assistant", "r1")],
                [("user", "f1"), ("user", "f2"), ("assistant", "r2")],
            ],
        ),
    ],
)
async def test_follow_up_modes(mode: str, expected_turns: list[Any]) -> None:
    agent, recorder, _ = make_agent(
        ["r1", "r2", "r3"],
        settings=Settings(follow_up_mode=mode),  # type: ignore[arg-type]
    )
    agent.follow_up("f1")
    agent.follow_up("f2")
    await agent.prompt("p")
    check_event_grammar(recorder.events)
    assert turns(recorder) == expected_turns
    assert agent.state.follow_up_queue == ()


# ------------------------------------------------------------------ queues and errors


async def test_queues_are_visible_in_state() -> None:
    agent, _, _ = make_agent([])
    agent.steer("s1")
    agent.follow_up("f1")
    agent.follow_up(UserMessage(content="f2"))
    state = agent.state
    assert contents(state.steering_queue) == ["s1"]
    assert contents(state.follow_up_queue) == ["f1", "f2"]
    assert all(isinstance(m, UserMessage) for m in state.steering_queue + state.follow_up_queue)
    assert isinstance(state.steering_queue, tuple)


async def test_queues_are_kept_after_an_error() -> None:
    agent, recorder, _ = make_agent([faux.error("boom", after=[faux.text("par")])])
    agent.follow_up("later")

    def steer_mid_stream(event: Any, signal: Any) -> None:
        if event.type == "message_update" and not agent.state.steering_queue:
            agent.steer("redirect")

    agent.subscribe(steer_mid_stream)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "error"
    assert contents(agent.state.follow_up_queue) == ["later"]
    assert contents(agent.state.steering_queue) == ["redirect"]


async def test_reset_clears_the_queues() -> None:
    agent, _, _ = make_agent(["ok"])
    agent.steer("s")
    agent.follow_up("f")
    agent.reset()
    assert agent.state.steering_queue == ()
    assert agent.state.follow_up_queue == ()


# ------------------------------------------------------------------ resume


async def test_resume_after_a_provider_error_delivers_the_queued_follow_up() -> None:
    agent, recorder, provider = make_agent([faux.error("boom"), "answer to later"])
    agent.follow_up("later")
    await agent.prompt("hi")
    assert recorder.of_type(AgentEnd)[0].reason == "error"
    assert contents(agent.state.follow_up_queue) == ["later"]

    recorder.clear()
    await agent.resume()
    check_event_grammar(recorder.events)
    assert turns(recorder) == [[("user", "later"), ("assistant", "answer to later")]]
    assert recorder.of_type(AgentEnd)[0].reason == "stop"
    assert agent.state.follow_up_queue == ()
    assert agent.state.error_message is None
    # the failed reply is not sent again
    assert [m.content for m in provider.requests[1].messages] == ["hi", "later"]


async def test_resume_after_an_error_with_empty_queues_resends_the_transcript() -> None:
    agent, recorder, provider = make_agent([faux.error("boom"), "second try"])
    await agent.prompt("hi")
    recorder.clear()
    await agent.resume()
    check_event_grammar(recorder.events)
    assert turns(recorder) == [[("assistant", "second try")]]
    assert [m.role for m in provider.requests[1].messages] == ["user"]
    assert recorder.of_type(AgentEnd)[0].reason == "stop"


async def test_resume_with_a_steering_message_after_a_complete_reply() -> None:
    agent, recorder, _ = make_agent(["one", "two"])
    await agent.prompt("hi")
    agent.steer("go on")
    recorder.clear()
    await agent.resume()
    check_event_grammar(recorder.events)
    assert turns(recorder) == [[("user", "go on"), ("assistant", "two")]]


async def test_resume_with_a_user_tail_resends_it() -> None:
    agent, recorder, provider = make_agent(["answer"], messages=(UserMessage(content="pending"),))
    await agent.resume()
    check_event_grammar(recorder.events)
    assert turns(recorder) == [[("assistant", "answer")]]
    assert [m.content for m in provider.requests[0].messages] == ["pending"]


async def test_resume_with_nothing_to_do_raises_value_error() -> None:
    agent, recorder, _ = make_agent(["one"])
    with pytest.raises(ValueError, match="nothing to resume"):
        await agent.resume()  # empty transcript
    await agent.prompt("hi")
    with pytest.raises(ValueError, match="nothing to resume"):
        await agent.resume()  # complete reply, empty queues
    check_event_grammar(recorder.events)
    assert len(recorder.of_type("agent_start")) == 1
    assert agent.state.is_streaming is False
