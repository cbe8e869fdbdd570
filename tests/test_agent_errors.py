"""Lifecycle rule 1: no exception escapes a run; failures become an error assistant message.

Provider failures (``ProviderError``, an arbitrary exception, a stream cut short) and
raising listeners each end the run through the normal events, with ``prompt()`` returning
normally and the agent idle and usable afterwards.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import BaseModel

from mainspring import Agent, AssistantMessage, ProviderError, Tool
from mainspring.events import AgentEnd, MessageEnd, Retry, TurnEnd
from mainspring.settings import RetrySettings, Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

NO_RETRY = Settings(retry=RetrySettings(max_attempts=0))


def make_agent(
    steps: list[Any], *, settings: Settings | None = None, **kwargs: Any
) -> tuple[Agent, EventRecorder]:
    provider = FauxProvider(steps, **kwargs)
    agent = Agent(model="faux:test", provider=provider, autoload=False, settings=settings)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder


def assert_idle(agent: Agent) -> None:
    state = agent.state
    assert state.is_streaming is False
    assert state.phase == "idle"
    assert state.pending_tool_calls == frozenset()
    assert state.streaming_message is None


def final_assistant(recorder: EventRecorder) -> AssistantMessage:
    return recorder.messages("assistant")[-1]


# ------------------------------------------------------------------ provider failures


async def test_provider_error_becomes_an_error_message() -> None:
    agent, recorder = make_agent([faux.error("model overloaded", status_code=529)])
    await agent.prompt("hi")  # returns normally

    check_event_grammar(recorder.events)
    message = final_assistant(recorder)
    assert message.stop_reason == "error"
    assert "model overloaded" in (message.error_message or "")
    assert agent.state.messages[-1] == message
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "error"
    assert "model overloaded" in (end.detail or "")
    (turn_end,) = recorder.of_type(TurnEnd)
    assert turn_end.message == message
    assert_idle(agent)
    assert "model overloaded" in (agent.state.error_message or "")
    assert recorder.types()[-2:] == ["phase_change", "agent_end"]


async def test_arbitrary_provider_exception_becomes_an_error_message() -> None:
    agent, recorder = make_agent([faux.raises(RuntimeError("socket exploded"))])
    await agent.prompt("hi")

    check_event_grammar(recorder.events)
    message = final_assistant(recorder)
    assert message.stop_reason == "error"
    assert "socket exploded" in (message.error_message or "")
    assert "RuntimeError" in (message.error_message or "")
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "error"
    assert_idle(agent)
    assert "socket exploded" in (agent.state.error_message or "")


async def test_provider_error_after_partial_output_keeps_the_partial_text() -> None:
    agent, recorder = make_agent([faux.error("connection reset", after=[faux.text("Half an ")])])
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    message = final_assistant(recorder)
    assert message.stop_reason == "error"
    assert message.text == "Half an "
    assert "connection reset" in (message.error_message or "")
    assert recorder.types().count("message_update") >= 1
    assert_idle(agent)


async def test_error_message_is_cleared_by_the_next_run() -> None:
    agent, recorder = make_agent([faux.error("boom"), faux.text("fine")])
    await agent.prompt("first")
    assert agent.state.error_message is not None

    seen_at_start: list[str | None] = []

    def on_start(event: Any, signal: Any) -> None:
        if event.type == "agent_start":
            seen_at_start.append(agent.state.error_message)

    agent.subscribe(on_start)
    await agent.prompt("second")
    check_event_grammar(recorder.events)
    assert seen_at_start == [None]
    assert agent.state.error_message is None
    assert final_assistant(recorder).stop_reason == "stop"
    assert recorder.of_type(AgentEnd)[-1].reason == "stop"


async def test_error_message_is_set_before_agent_end_is_delivered() -> None:
    agent, recorder = make_agent([faux.error("boom")])
    seen: list[str | None] = []

    def on_end(event: Any, signal: Any) -> None:
        if event.type == "agent_end":
            seen.append(agent.state.error_message)

    agent.subscribe(on_end)
    await agent.prompt("hi")
    assert seen and "boom" in (seen[0] or "")
    check_event_grammar(recorder.events)


async def test_stream_cut_without_stream_done_is_an_error() -> None:
    agent, recorder = make_agent([faux.cut(faux.text("partial"))], settings=NO_RETRY)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    message = final_assistant(recorder)
    assert message.stop_reason == "error"
    assert "stream ended before completion" in (message.error_message or "")
    assert message.text == "partial"
    assert recorder.of_type(AgentEnd)[0].reason == "error"
    assert_idle(agent)


async def test_stream_cut_is_retried_and_reported_in_the_retry_event() -> None:
    settings = Settings(retry=RetrySettings(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02))
    agent, recorder = make_agent([faux.cut(), faux.text("second try")], settings=settings)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    (retry,) = recorder.of_type(Retry)
    assert "stream ended before completion" in retry.error
    assert (retry.attempt, retry.max_attempts) == (1, 2)
    assert final_assistant(recorder).text == "second try"
    # the failed attempt streamed nothing: no message is left in the transcript
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    assert agent.state.messages[-1].stop_reason == "stop"


async def test_retry_exhaustion_ends_in_error_naming_the_cause() -> None:
    settings = Settings(retry=RetrySettings(max_attempts=1, base_delay_s=0.01, max_delay_s=0.01))
    agent, recorder = make_agent(
        [faux.error("overloaded", retryable=True), faux.error("still overloaded", retryable=True)],
        settings=settings,
    )
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assert len(recorder.of_type(Retry)) == 1
    message = final_assistant(recorder)
    assert message.stop_reason == "error"
    assert "still overloaded" in (message.error_message or "")
    assert recorder.types().count("phase_change") == 4  # idle>turn>retry>turn>idle
    assert_idle(agent)


async def test_exhausted_faux_script_is_an_error_message() -> None:
    agent, recorder = make_agent([])
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    message = final_assistant(recorder)
    assert message.stop_reason == "error"
    assert "exhausted" in (message.error_message or "")
    assert_idle(agent)


async def test_provider_error_class_fields_survive_to_the_message() -> None:
    agent, recorder = make_agent([ProviderError("bad request: schema", status_code=400)])
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assert "bad request: schema" in (final_assistant(recorder).error_message or "")


async def test_agent_is_usable_after_a_provider_error() -> None:
    agent, recorder = make_agent([faux.error("boom"), faux.text("recovered")])
    await agent.prompt("first")
    await agent.prompt("second")
    check_event_grammar(recorder.events)
    assert [e.reason for e in recorder.of_type(AgentEnd)] == ["error", "stop"]
    assert final_assistant(recorder).text == "recovered"
    assert_idle(agent)


# ------------------------------------------------------------------ raising listeners


def raising_listener(event_type: str, *, is_async: bool) -> Any:
    """A listener that raises once, on the first event of ``event_type``."""
    fired: list[bool] = []

    if is_async:

        async def boom_listener(event: Any, signal: Any) -> None:
            if event.type == event_type and not fired:
                fired.append(True)
                raise ValueError(f"listener blew up on {event_type}")

        return boom_listener

    def boom_listener_sync(event: Any, signal: Any) -> None:
        if event.type == event_type and not fired:
            fired.append(True)
            raise ValueError(f"listener blew up on {event_type}")

    return boom_listener_sync


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("event_type", ["message_update", "agent_start", "turn_start", "turn_end"])
async def test_raising_listener_ends_the_run_with_an_error_naming_it(
    event_type: str, is_async: bool
) -> None:
    agent, recorder = make_agent([faux.text("hello there"), faux.text("second run")])
    listener = raising_listener(event_type, is_async=is_async)
    agent.subscribe(listener)

    await agent.prompt("hi")  # returns normally

    check_event_grammar(recorder.events)
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "error"
    name = listener.__name__
    assert name in (end.detail or "")
    assert event_type in (end.detail or "")
    assert "listener blew up" in (end.detail or "")
    message = final_assistant(recorder)
    assert message.stop_reason == "error"
    assert name in (message.error_message or "")
    assert name in (agent.state.error_message or "")
    assert_idle(agent)
    # the error message is part of a turn
    assert recorder.types()[-3:] == ["turn_end", "phase_change", "agent_end"]

    # the agent is usable again
    recorder.clear()
    await agent.prompt("again")
    check_event_grammar(recorder.events)
    assert recorder.of_type(AgentEnd)[0].reason == "stop"
    assert agent.state.error_message is None
    assert_idle(agent)


async def test_listener_raising_on_agent_start_gets_a_turn_opened_for_the_error() -> None:
    agent, recorder = make_agent([faux.text("never requested")])
    agent.subscribe(raising_listener("agent_start", is_async=False))
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    types = recorder.types()
    assert types[0] == "agent_start"
    assert "turn_start" in types and "turn_end" in types
    assert types[-2:] == ["phase_change", "agent_end"]
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "error"


@pytest.mark.parametrize("event_type", ["agent_start", "phase_change", "turn_start"])
async def test_a_prompt_a_failure_kept_from_its_turn_is_kept_and_can_be_resumed(
    event_type: str,
) -> None:
    agent, recorder = make_agent([faux.text("answered")])
    unsubscribe = agent.subscribe(raising_listener(event_type, is_async=False))
    await agent.prompt("the question")
    check_event_grammar(recorder.events)
    roles = [m.role for m in agent.state.messages]
    assert roles == ["user", "assistant"], "the prompt is kept, before the error"
    assert agent.state.messages[0].content == "the question"
    assert agent.state.messages[1].stop_reason == "error"
    assert recorder.of_type(AgentEnd)[0].messages == agent.state.messages

    unsubscribe()
    await agent.resume()  # re-sends the transcript up to the error: the question
    assert agent.last_message.text == "answered"
    assert agent.provider.requests[-1].messages[0].content == "the question"


async def test_a_stop_before_the_first_turn_keeps_the_prompt() -> None:
    from mainspring import StopRun, hookimpl

    class StopAtOnce:
        @hookimpl
        def on_event(self, event: Any) -> None:
            if event.type == "agent_start":
                raise StopRun("not now")

    provider = FauxProvider([faux.text("never requested")])
    agent = Agent(model="faux:test", provider=provider, plugins=[StopAtOnce()], autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("kept")
    check_event_grammar(recorder.events)
    (end,) = recorder.of_type(AgentEnd)
    assert (end.reason, end.detail) == ("stopped_by_hook", "not now")
    assert [m.role for m in agent.state.messages] == ["user"]
    assert provider.requests == []


async def test_listener_raising_on_turn_end_opens_a_second_turn_for_the_error() -> None:
    agent, recorder = make_agent([faux.text("hello")])
    agent.subscribe(raising_listener("turn_end", is_async=True))
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assert [e.turn for e in recorder.of_type("turn_start")] == [0, 1]
    turn_ends = recorder.of_type(TurnEnd)
    assert turn_ends[0].message is not None and turn_ends[0].message.text == "hello"
    assert turn_ends[1].message is not None and turn_ends[1].message.stop_reason == "error"


async def test_listener_raising_on_message_update_closes_the_partial_message() -> None:
    agent, recorder = make_agent([faux.text("abcdefghijkl")], chunk_size=2)
    agent.subscribe(raising_listener("message_update", is_async=False))
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    assistants = recorder.messages("assistant")
    assert len(assistants) == 1  # the partial message is closed, not duplicated
    assert assistants[0].stop_reason == "error"
    assert "abcdefghijkl".startswith(assistants[0].text)


@pytest.mark.parametrize("event_type", ["agent_start", "turn_end", "message_end"])
async def test_listener_subscribed_after_a_raising_listener_sees_a_grammatical_stream(
    event_type: str,
) -> None:
    """Every listener sees the same total order (DESIGN §4 rule 3), including those
    subscribed after the one that raised."""
    agent, first = make_agent([faux.text("hello")])
    agent.subscribe(raising_listener(event_type, is_async=False))
    later = EventRecorder()
    agent.subscribe(later)
    await agent.prompt("hi")
    check_event_grammar(first.events)
    check_event_grammar(later.events)
    assert later.types() == first.types()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_listener_raising_on_agent_end_changes_nothing(is_async: bool) -> None:
    agent, recorder = make_agent([faux.text("hello"), faux.text("again")])
    agent.subscribe(raising_listener("agent_end", is_async=is_async))
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "stop"
    assert final_assistant(recorder).stop_reason == "stop"
    assert agent.state.error_message is None
    assert_idle(agent)
    assert recorder.types() == [
        "agent_start",
        "phase_change",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_update",  # "hell"
        "message_update",  # "o"
        "message_update",  # usage
        "message_end",
        "turn_end",
        "phase_change",
        "agent_end",
    ]
    await agent.prompt("second")
    assert recorder.of_type(AgentEnd)[-1].reason == "stop"


async def test_listener_raising_on_phase_change_to_idle_changes_nothing() -> None:
    agent, recorder = make_agent([faux.text("hello")])

    def boom_on_idle(event: Any, signal: Any) -> None:
        if event.type == "phase_change" and event.phase == "idle":
            raise RuntimeError("renderer crashed")

    agent.subscribe(boom_on_idle)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "stop"
    assert agent.state.error_message is None
    assert_idle(agent)


async def test_listener_raising_on_every_event_still_ends_cleanly() -> None:
    agent, recorder = make_agent([faux.text("hello")])

    def always(event: Any, signal: Any) -> None:
        raise RuntimeError("always broken")

    agent.subscribe(always)
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "error"
    assert "always" in (end.detail or "")
    assert_idle(agent)


async def test_error_message_event_carries_the_failure_in_message_end() -> None:
    agent, recorder = make_agent([faux.error("nope")])
    await agent.prompt("hi")
    ends = [e for e in recorder.of_type(MessageEnd) if e.message.role == "assistant"]
    assert len(ends) == 1
    assert ends[0].message.error_message is not None
    assert "nope" in ends[0].message.error_message
    check_event_grammar(recorder.events)


@pytest.mark.parametrize("event_type", ["tool_execution_start", "tool_execution_end"])
async def test_listener_raising_mid_batch_still_gives_every_call_a_result(event_type: str) -> None:
    class Args(BaseModel):
        seconds: float

    async def nap(args: Args, ctx: Any) -> str:
        await asyncio.sleep(args.seconds)
        return "rested"

    provider = FauxProvider(
        [[faux.tool_call("nap", {"seconds": 0}), faux.tool_call("nap", {"seconds": 3600})]]
    )
    agent = Agent(
        model="faux:test",
        provider=provider,
        autoload=False,
        tools=[Tool("nap", "nap", Args, nap)],
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    agent.subscribe(raising_listener(event_type, is_async=False))
    began = time.monotonic()
    await agent.prompt("go")
    assert time.monotonic() - began < 1.0
    check_event_grammar(recorder.events)
    results = recorder.messages("tool_result")
    assert len(results) == 2
    (end,) = recorder.of_type(AgentEnd)
    assert end.reason == "error"
    assert event_type in (end.detail or "")
    assert_idle(agent)
    leftover = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
    assert leftover == set()


async def test_failed_retry_attempt_that_streamed_is_not_kept_in_the_transcript() -> None:
    settings = Settings(retry=RetrySettings(max_attempts=1, base_delay_s=0.01, max_delay_s=0.01))
    agent, recorder = make_agent(
        [faux.error("flaky", retryable=True, after=[faux.text("half")]), faux.text("whole")],
        settings=settings,
    )
    await agent.prompt("hi")
    check_event_grammar(recorder.events)
    streamed = recorder.messages("assistant")
    assert [m.stop_reason for m in streamed] == ["error", "stop"]
    assert streamed[0].text == "half"
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    assert agent.state.messages[-1].text == "whole"
    assert recorder.of_type(TurnEnd)[0].message == streamed[1]
    assert recorder.of_type(AgentEnd)[0].reason == "stop"


@pytest.mark.parametrize("prompt", [None, 3, b"bytes"])
def test_a_system_prompt_that_is_not_text_is_refused_at_once(prompt: Any) -> None:
    with pytest.raises(TypeError, match="system_prompt must be a str"):
        Agent(model="faux:test", provider=FauxProvider([]), autoload=False, system_prompt=prompt)
    agent = Agent(model="faux:test", provider=FauxProvider([]), autoload=False)
    if prompt is None:  # configure(system_prompt=None) means "leave it as it is"
        agent.configure(system_prompt=prompt)
        assert agent.state.system_prompt == ""
        return
    with pytest.raises(TypeError, match="system_prompt must be a str"):
        agent.configure(system_prompt=prompt)


def test_an_unknown_thinking_level_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="thinking_level must be one of off, minimal"):
        Agent(model="faux:test", provider=FauxProvider([]), autoload=False, thinking_level="max")
    agent = Agent(model="faux:test", provider=FauxProvider([]), autoload=False)
    with pytest.raises(ValueError, match="got 'extreme'"):
        agent.configure(thinking_level="extreme")  # type: ignore[arg-type]
    assert agent.state.thinking_level == "off"
