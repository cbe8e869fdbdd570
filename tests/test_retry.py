"""The ``retry`` phase (DESIGN §9, §15 "Retry").

- Only ``ProviderError(retryable=True)`` is retried, at most ``settings.retry.max_attempts``
  times after the first request; each retry emits a ``retry`` event (1-based ``attempt``)
  inside ``turn → retry → turn``.
- Delay = ``retry_after`` when given, else ``base_delay_s · 2^(attempt-1)`` with ±50%
  jitter; both capped at ``max_delay_s``. The sleep ends at once on abort.
- A failed attempt that streamed nothing leaves no message; one that streamed ends its
  message with ``stop_reason="error"`` and that message is not kept in the transcript.
- Exhausted attempts end the run with an error message naming the last error.

Every run here is on the FauxProvider and its events pass ``check_event_grammar``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mainspring import Agent, AssistantMessage, ProviderError
from mainspring.kernel.request import retry_delay
from mainspring.settings import RetrySettings, Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

FAST = Settings(retry=RetrySettings(max_attempts=2, base_delay_s=0.001))


def text_of(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return "".join(getattr(block, "text", "") for block in content)


def phases(recorder: EventRecorder) -> list[tuple[str, str]]:
    return [(event.previous, event.phase) for event in recorder.of_type("phase_change")]


def busy(message: str = "overloaded", **kwargs: Any) -> Any:
    kwargs.setdefault("status_code", 529)
    return faux.error(message, retryable=True, **kwargs)


async def run(
    steps: list[Any], settings: Settings | None = None
) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps)
    agent = Agent(model="faux:test", provider=provider, autoload=False, settings=settings)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("hello")
    check_event_grammar(recorder.events)
    return agent, recorder, provider


# == recovery ===========================================================================


async def test_a_retry_recovers_and_drops_the_failed_partial_message() -> None:
    agent, recorder, provider = await run(
        [busy(retry_after=0.01, after=[faux.text("partial")]), faux.text("final answer")]
    )
    [retry] = recorder.of_type("retry")
    assert retry.attempt == 1
    assert retry.max_attempts == 3  # the default
    assert retry.delay_s == pytest.approx(0.01)
    assert retry.error == "overloaded"
    assert retry.turn == 0
    assert phases(recorder) == [
        ("idle", "turn"),
        ("turn", "retry"),
        ("retry", "turn"),
        ("turn", "idle"),
    ]
    assert len(provider.requests) == 2
    assert provider.requests[0].messages == provider.requests[1].messages

    # the failed attempt streamed, so its message ended with stop_reason="error" ...
    ended = recorder.messages("assistant")
    assert [(m.stop_reason, text_of(m)) for m in ended] == [
        ("error", "partial"),
        ("stop", "final answer"),
    ]
    types = recorder.types()
    assert types.index("retry") > types.index("message_end")
    # ... and is not kept: not in the transcript, not in agent_end, not in turn_end
    messages = agent.state.messages
    assert [m.role for m in messages] == ["user", "assistant"]
    assert text_of(messages[-1]) == "final answer"
    assert all("partial" not in text_of(m) for m in messages)
    [turn_end] = recorder.of_type("turn_end")
    assert text_of(turn_end.message) == "final answer"
    [end] = recorder.of_type("agent_end")
    assert end.reason == "stop"
    assert [m.role for m in end.messages] == ["user", "assistant"]
    assert agent.state.error_message is None


async def test_a_failed_attempt_that_streamed_nothing_leaves_no_message() -> None:
    agent, recorder, _ = await run([busy(retry_after=0.0), "ok"])
    assert len(recorder.of_type("retry")) == 1
    assert [m.stop_reason for m in recorder.messages("assistant")] == ["stop"]
    assert len(recorder.of_type("message_start")) == 2  # the prompt and the reply
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]


async def test_the_state_is_in_phase_retry_during_the_retry_event() -> None:
    provider = FauxProvider([busy(retry_after=0.0), "ok"])
    agent = Agent(model="faux:test", provider=provider, autoload=False)
    seen: list[tuple[str, bool, Any]] = []

    def listener(event: Any, signal: Any) -> None:
        if event.type == "retry":
            state = agent.state
            seen.append((state.phase, state.is_streaming, state.streaming_message))

    agent.subscribe(listener)
    await agent.prompt("hello")
    assert seen == [("retry", True, None)]


async def test_several_retries_count_attempts_from_one() -> None:
    settings = Settings(retry=RetrySettings(max_attempts=3, base_delay_s=0.001))
    agent, recorder, provider = await run(
        [busy("e1"), busy("e2", after=["half"]), busy("e3"), "ok"], settings
    )
    retries = recorder.of_type("retry")
    assert [(r.attempt, r.max_attempts, r.error) for r in retries] == [
        (1, 3, "e1"),
        (2, 3, "e2"),
        (3, 3, "e3"),
    ]
    # jittered backoff: base · 2^(attempt-1) · [0.5, 1.5]
    for retry in retries:
        nominal = 0.001 * 2 ** (retry.attempt - 1)
        assert 0.5 * nominal <= retry.delay_s <= 1.5 * nominal
    assert len(provider.requests) == 4
    assert text_of(agent.state.messages[-1]) == "ok"
    assert phases(recorder).count(("turn", "retry")) == 3


async def test_a_stream_that_ends_before_completion_is_retried() -> None:
    agent, recorder, _ = await run([faux.cut("half a rep"), "whole reply"], FAST)
    [retry] = recorder.of_type("retry")
    assert "stream ended before completion" in retry.error
    assert text_of(agent.state.messages[-1]) == "whole reply"
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]


async def test_a_retry_in_a_later_turn_keeps_the_earlier_turns() -> None:
    from mainspring import tool

    @tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    provider = FauxProvider([faux.tool_call("echo", {"text": "hi"}), busy(after=["oops"]), "done"])
    agent = Agent(model="faux:test", provider=provider, tools=[echo], autoload=False, settings=FAST)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("hello")
    check_event_grammar(recorder.events)
    [retry] = recorder.of_type("retry")
    assert retry.turn == 1
    assert [m.role for m in agent.state.messages] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert provider.requests[1].messages == provider.requests[2].messages


# == giving up ==========================================================================


async def test_exhausted_attempts_end_with_an_error_naming_the_last_error() -> None:
    agent, recorder, provider = await run(
        [busy("e1"), busy("e2"), busy("rate limited (e3)", status_code=429), "never sent"], FAST
    )
    assert [r.attempt for r in recorder.of_type("retry")] == [1, 2]
    assert len(provider.requests) == 3
    assert provider.remaining == 1
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error"
    assert last.error_message is not None and "rate limited (e3)" in last.error_message
    assert "e1" not in last.error_message
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    [end] = recorder.of_type("agent_end")
    assert end.reason == "error"
    assert end.detail is not None and "rate limited (e3)" in end.detail
    assert agent.state.error_message == end.detail
    assert agent.state.phase == "idle"


async def test_the_last_failed_attempt_keeps_its_partial_text() -> None:
    agent, recorder, _ = await run([busy("e1"), busy("e2"), busy("e3", after=["half"])], FAST)
    last = agent.state.messages[-1]
    assert last.stop_reason == "error"
    assert text_of(last) == "half"
    assert "e3" in (last.error_message or "")
    # the kept failure is the only assistant message in the transcript
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    assert recorder.of_type("turn_end")[0].message == last


async def test_max_attempts_zero_never_retries() -> None:
    settings = Settings(retry=RetrySettings(max_attempts=0, base_delay_s=0.001))
    agent, recorder, provider = await run([busy("e1"), "never sent"], settings)
    assert recorder.of_type("retry") == []
    assert len(provider.requests) == 1
    assert agent.state.messages[-1].stop_reason == "error"
    assert ("turn", "retry") not in phases(recorder)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (faux.error("bad request", status_code=400), "bad request"),
        (faux.error("unauthorised", status_code=401), "unauthorised"),
        (faux.raises(RuntimeError("kaput")), "kaput"),
    ],
    ids=["400", "401", "not-a-provider-error"],
)
async def test_non_retryable_errors_are_not_retried(step: Any, expected: str) -> None:
    agent, recorder, provider = await run([step, "never sent"], FAST)
    assert recorder.of_type("retry") == []
    assert ("turn", "retry") not in phases(recorder)
    assert len(provider.requests) == 1
    assert provider.remaining == 1
    last = agent.state.messages[-1]
    assert last.stop_reason == "error"
    assert expected in (last.error_message or "")
    [end] = recorder.of_type("agent_end")
    assert end.reason == "error"
    assert expected in (end.detail or "")


async def test_a_retryable_error_then_a_fatal_one_stops_retrying() -> None:
    agent, recorder, provider = await run(
        [busy("e1"), faux.error("bad request", status_code=400), "never sent"], FAST
    )
    assert len(recorder.of_type("retry")) == 1
    assert len(provider.requests) == 2
    assert "bad request" in (agent.state.messages[-1].error_message or "")


# == abort ==============================================================================


async def test_abort_during_a_long_backoff_returns_at_once() -> None:
    provider = FauxProvider([busy(retry_after=30), "the next run's reply"])
    agent = Agent(model="faux:test", provider=provider, autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    in_backoff = asyncio.Event()

    def listener(event: Any, signal: Any) -> None:
        if event.type == "retry":
            in_backoff.set()

    agent.subscribe(listener)
    task = asyncio.ensure_future(agent.prompt("hello"))
    await in_backoff.wait()
    assert recorder.of_type("retry")[0].delay_s == 30
    started = time.monotonic()
    agent.abort()
    await asyncio.wait_for(task, timeout=5)
    assert time.monotonic() - started < 1
    check_event_grammar(recorder.events)

    [end] = recorder.of_type("agent_end")
    assert end.reason == "aborted"
    assert len(provider.requests) == 1
    last = agent.state.messages[-1]
    assert last.stop_reason == "aborted"
    assert phases(recorder) == [
        ("idle", "turn"),
        ("turn", "retry"),
        ("retry", "turn"),
        ("turn", "idle"),
    ]
    state = agent.state
    assert (state.phase, state.is_streaming, state.error_message) == ("idle", False, end.detail)

    # the agent is usable again; the aborted run sent no second request
    recorder.clear()
    await agent.prompt("again")
    check_event_grammar(recorder.events)
    assert text_of(agent.state.messages[-1]) == "the next run's reply"


async def test_abort_from_the_retry_listener_skips_the_sleep() -> None:
    provider = FauxProvider([busy(retry_after=30), "never sent"])
    agent = Agent(model="faux:test", provider=provider, autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)

    def listener(event: Any, signal: Any) -> None:
        if event.type == "retry":
            agent.abort()

    agent.subscribe(listener)
    started = time.monotonic()
    await asyncio.wait_for(agent.prompt("hello"), timeout=5)
    assert time.monotonic() - started < 1
    check_event_grammar(recorder.events)
    assert recorder.of_type("agent_end")[0].reason == "aborted"
    assert len(provider.requests) == 1


# == retry_delay ========================================================================


def error(retry_after: float | None = None) -> ProviderError:
    return ProviderError("busy", retryable=True, retry_after=retry_after)


@pytest.mark.parametrize("attempt", [1, 2, 3, 4])
def test_retry_after_is_honoured(attempt: int) -> None:
    assert retry_delay(attempt, error(2.5), 1.0, 30.0) == 2.5


def test_retry_after_is_capped_and_never_negative() -> None:
    assert retry_delay(1, error(120.0), 1.0, 30.0) == 30.0
    assert retry_delay(1, error(0.0), 1.0, 30.0) == 0.0
    assert retry_delay(1, error(-5.0), 1.0, 30.0) == 0.0


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 5])
def test_backoff_doubles_with_fifty_percent_jitter(attempt: int) -> None:
    nominal = 1.0 * 2 ** (attempt - 1)
    delays = [retry_delay(attempt, error(), 1.0, 1_000.0) for _ in range(2_000)]
    assert all(0.5 * nominal <= delay <= 1.5 * nominal for delay in delays)
    # it is jittered, across (most of) the whole band
    assert min(delays) < 0.6 * nominal
    assert max(delays) > 1.4 * nominal
    assert len(set(delays)) > 1_900


def test_backoff_is_capped_at_max_delay() -> None:
    delays = [retry_delay(attempt, error(), 1.0, 30.0) for attempt in range(1, 12)]
    assert all(0.0 <= delay <= 30.0 for delay in delays)
    # from attempt 7 on even the lowest jitter (0.5 · 64 s) is above the cap
    assert delays[6:] == [30.0] * 5
    # attempt 6: 32 s · [0.5, 1.5] capped → [16, 30]
    samples = [retry_delay(6, error(), 1.0, 30.0) for _ in range(500)]
    assert all(16.0 <= delay <= 30.0 for delay in samples)
    assert 30.0 in samples


def test_zero_base_delay_retries_at_once() -> None:
    assert retry_delay(3, error(), 0.0, 30.0) == 0.0


def test_the_defaults_match_the_contract() -> None:
    settings = RetrySettings()
    assert (settings.max_attempts, settings.base_delay_s, settings.max_delay_s) == (3, 1.0, 30.0)


# == combined with compaction and sessions ==============================================


async def test_a_retry_then_an_overflow_then_success() -> None:
    from mainspring import CompactionSummary, TextContent, UserMessage

    provider = FauxProvider(
        [busy(after=["par"]), faux.error("prompt is too long", context_overflow=True), "ok"]
    )
    history = [
        UserMessage(content="old"),
        AssistantMessage(
            content=(TextContent(text="old answer"),),
            provider="faux",
            model="test",
            stop_reason="stop",
        ),
    ]
    agent = Agent(
        model="faux:test", provider=provider, messages=history, autoload=False, settings=FAST
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("hello")
    check_event_grammar(recorder.events)
    assert phases(recorder) == [
        ("idle", "turn"),
        ("turn", "retry"),
        ("retry", "turn"),
        ("turn", "compaction"),
        ("compaction", "turn"),
        ("turn", "idle"),
    ]
    assert [e.reason for e in recorder.of_type("compaction_start")] == ["overflow"]
    assert len(provider.requests) == 3
    messages = agent.state.messages
    assert isinstance(messages[0], CompactionSummary)
    assert text_of(messages[-1]) == "ok"
    assert all(text_of(m) != "par" for m in messages)


async def test_a_failed_attempt_is_not_written_to_the_session(tmp_path: Any) -> None:
    path = tmp_path / "session.jsonl"
    settings = Settings(retry=RetrySettings(base_delay_s=0.001), session_path=str(path))
    agent, _, _ = await run([busy(after=["partial"]), "final"], settings)
    assert "partial" not in path.read_text()
    resumed = Agent.from_session(path, provider=FauxProvider(), autoload=False)
    assert list(resumed.state.messages) == list(agent.state.messages)
