"""The ``compaction`` phase, run level (DESIGN §9, §15 "Compaction").

- Before each model request the kernel counts the tokens of the messages about to be sent;
  above ``context_window - reserve_tokens`` it moves ``turn → compaction``, emits
  ``compaction_start``, calls ``compact``, replaces the transcript with the result (a
  summary marker plus the kept tail, tool pairs never split), emits ``compaction_end``
  with ``tokens_before``/``tokens_after`` and moves back to ``turn``.
- The first non-``None`` ``compact`` result wins; the built-in fallback runs last.
- A raising ``compact``, or one whose result breaks the transcript invariants, gives
  ``hook_error`` (naming the plugin) and ``compaction_end`` with ``error``; the run goes on
  uncompacted.
- ``ProviderError(context_overflow=True)`` gives exactly one compaction (``overflow``) and
  one re-send; a second overflow ends the run with an error message.

Every run here is on the FauxProvider and its events pass ``check_event_grammar``.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from mainspring import (
    Agent,
    AssistantMessage,
    CompactionResult,
    CompactionSummary,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    hookimpl,
)
from mainspring.invariants import transcript_problem
from mainspring.settings import CompactionSettings, RetrySettings, Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

WINDOW = 2_000  # reserve = min(16_384, 2_000 // 4) = 500, so the threshold is 1_500 tokens
THRESHOLD = WINDOW - WINDOW // 4
SMALL_MODEL = Model(provider="faux", id="t", context_window=WINDOW)
PROMPT = "new question"


class Note(BaseModel):
    """A custom (non-LLM) message type."""

    model_config = ConfigDict(frozen=True)
    role: Literal["note"] = "note"
    text: str
    timestamp: float = Field(default_factory=time.time)


def assistant(*content: Any, stop_reason: str = "stop") -> AssistantMessage:
    return AssistantMessage(
        content=tuple(content), provider="faux", model="t", stop_reason=stop_reason
    )


def tool_pair(call_id: str, size: int = 50) -> list[Any]:
    return [
        assistant(
            ToolCall(id=call_id, name="echo", arguments={"text": "x" * size}),
            stop_reason="tool_use",
        ),
        ToolResultMessage(
            tool_call_id=call_id,
            tool_name="echo",
            content=(TextContent(text="x" * size),),
            is_error=False,
        ),
    ]


def long_history(exchanges: int = 12) -> list[Any]:
    """About 2_100 estimated tokens: above the 1_500-token threshold of ``SMALL_MODEL``.

    Every third exchange has a tool call and its result before the answer.
    """
    messages: list[Any] = []
    for index in range(exchanges):
        messages.append(UserMessage(content=f"question {index} " + "q" * 300))
        if index % 3 == 0:
            messages += tool_pair(f"old{index}")
        messages.append(assistant(TextContent(text=f"answer {index} " + "a" * 300)))
    return messages


def short_history() -> list[Any]:
    return [
        UserMessage(content="old question"),
        *tool_pair("old1"),
        assistant(TextContent(text="old answer")),
    ]


def text_of(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return "".join(getattr(block, "text", "") for block in content)


def phases(recorder: EventRecorder) -> list[tuple[str, str]]:
    return [(event.previous, event.phase) for event in recorder.of_type("phase_change")]


async def run(
    steps: list[Any],
    *,
    messages: list[Any] | None = None,
    plugins: tuple[Any, ...] = (),
    model: Model | str = SMALL_MODEL,
    settings: Settings | None = None,
    prompt: str = PROMPT,
) -> tuple[Agent, EventRecorder, FauxProvider]:
    provider = FauxProvider(steps)
    agent = Agent(
        model=model,
        provider=provider,
        messages=long_history() if messages is None else messages,
        plugins=plugins,
        autoload=False,
        settings=settings,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt(prompt)
    check_event_grammar(recorder.events)
    return agent, recorder, provider


# == the threshold ======================================================================


async def test_compaction_at_the_threshold_replaces_the_transcript() -> None:
    history = long_history()
    agent, recorder, provider = await run([faux.text("done")], messages=history)

    [start] = recorder.of_type("compaction_start")
    [end] = recorder.of_type("compaction_end")
    assert start.reason == end.reason == "threshold"
    assert start.tokens_before == end.tokens_before
    assert start.tokens_before > THRESHOLD
    assert end.tokens_after < end.tokens_before
    assert end.tokens_after <= THRESHOLD
    assert end.error is None
    assert end.plugin == "fallback_compaction"  # the built-in fallback compacted
    assert start.turn == end.turn == 0
    assert phases(recorder) == [
        ("idle", "turn"),
        ("turn", "compaction"),
        ("compaction", "turn"),
        ("turn", "idle"),
    ]

    messages = agent.state.messages
    marker = messages[0]
    assert isinstance(marker, CompactionSummary)
    assert not any(isinstance(m, CompactionSummary) for m in messages[1:])
    # the marker stands for exactly the messages that are gone (the prompt is kept)
    assert marker.removed + len(messages) - 2 == len(history) + 1
    assert marker.tokens_before > 0
    assert messages[1:-1] == (*history, messages[-2])[marker.removed :]
    assert text_of(messages[-2]) == PROMPT
    assert text_of(messages[-1]) == "done"
    assert transcript_problem(messages) is None

    # one request, after compaction: the rendered summary first, then the kept tail
    [request] = provider.requests
    sent = request.messages
    assert isinstance(sent[0], UserMessage)
    assert marker.summary in text_of(sent[0])
    assert f"({marker.removed} messages)" in text_of(sent[0])
    assert text_of(sent[-1]) == PROMPT
    assert len(sent) == len(messages) - 1  # everything but the reply
    assert transcript_problem(sent, llm_only=True) is None


async def test_compaction_events_sit_between_the_prompt_and_the_reply() -> None:
    _, recorder, _ = await run([faux.text("done")])
    types = [t for t in recorder.types() if t != "message_update"]
    assert types == [
        "agent_start",
        "phase_change",
        "turn_start",
        "message_start",  # the prompt
        "message_end",
        "phase_change",
        "compaction_start",
        "compaction_end",
        "phase_change",
        "message_start",  # the reply
        "message_end",
        "turn_end",
        "phase_change",
        "agent_end",
    ]


async def test_the_state_is_in_phase_compaction_while_compacting() -> None:
    seen: list[tuple[str, str, int]] = []
    provider = FauxProvider([faux.text("done")])
    agent = Agent(model=SMALL_MODEL, provider=provider, messages=long_history(), autoload=False)

    def listener(event: Any, signal: Any) -> None:
        if event.type in ("compaction_start", "compaction_end"):
            state = agent.state
            seen.append((event.type, state.phase, len(state.messages)))

    agent.subscribe(listener)
    await agent.prompt(PROMPT)
    before = len(long_history()) + 1
    assert seen[0] == ("compaction_start", "compaction", before)
    assert seen[1][:2] == ("compaction_end", "compaction")
    assert seen[1][2] < before  # the transcript was replaced before compaction_end
    assert agent.state.phase == "idle"


async def test_the_agent_end_messages_and_a_later_run_after_compaction() -> None:
    agent, recorder, provider = await run([faux.text("done")])
    [end] = recorder.of_type("agent_end")
    assert [text_of(m) for m in end.messages] == [PROMPT, "done"]
    assert end.reason == "stop"

    # the next run starts from the compacted transcript and does not compact again
    provider.append(faux.text("again"))
    recorder.clear()
    await agent.prompt("short")
    check_event_grammar(recorder.events)
    assert recorder.of_type("compaction_start") == []
    assert isinstance(agent.state.messages[0], CompactionSummary)
    assert text_of(provider.requests[-1].messages[0]).startswith("[The earlier part")


async def test_no_compaction_below_the_threshold() -> None:
    _, recorder, provider = await run([faux.text("done")], messages=short_history())
    assert recorder.of_type("compaction_start") == []
    assert ("turn", "compaction") not in phases(recorder)
    assert len(provider.requests[0].messages) == len(short_history()) + 1


class FixedCount:
    """Reports a fixed token count for every request (tokens_after is the same number)."""

    name = "fixed-count"

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    @hookimpl(tryfirst=True)
    def count_tokens(self, messages: tuple[Any, ...]) -> int:
        return self.tokens


@pytest.mark.parametrize(
    ("tokens", "compacts"), [(THRESHOLD - 1, False), (THRESHOLD, False), (THRESHOLD + 1, True)]
)
async def test_the_threshold_is_strictly_above_window_minus_reserve(
    tokens: int, compacts: bool
) -> None:
    _, recorder, _ = await run(
        [faux.text("done")], messages=short_history(), plugins=(FixedCount(tokens),)
    )
    starts = recorder.of_type("compaction_start")
    assert bool(starts) is compacts
    if compacts:
        assert starts[0].tokens_before == tokens


async def test_reserve_tokens_setting_moves_the_threshold() -> None:
    settings = Settings(compaction=CompactionSettings(reserve_tokens=100))
    _, recorder, _ = await run([faux.text("done")], plugins=(FixedCount(1_800),), settings=settings)
    assert recorder.of_type("compaction_start") == []  # 1_800 <= 2_000 - 100

    _, recorder, _ = await run([faux.text("done")], plugins=(FixedCount(1_901),), settings=settings)
    assert len(recorder.of_type("compaction_start")) == 1


async def test_disabled_compaction_never_compacts() -> None:
    settings = Settings(compaction=CompactionSettings(enabled=False))
    agent, recorder, provider = await run([faux.text("done")], settings=settings)
    assert recorder.of_type("compaction_start") == []
    assert len(provider.requests[0].messages) == len(long_history()) + 1
    assert not isinstance(agent.state.messages[0], CompactionSummary)


async def test_count_tokens_sees_the_converted_messages() -> None:
    seen: list[tuple[str, ...]] = []

    class Spy:
        name = "spy"

        @hookimpl
        def count_tokens(self, messages: tuple[Any, ...]) -> None:
            seen.append(tuple(m.role for m in messages))

    history = [Note(text="n" * 10_000), *short_history()]
    _, recorder, _ = await run([faux.text("done")], messages=history, plugins=(Spy(),))
    # the huge custom note is dropped by convert_to_llm before counting: no compaction
    assert recorder.of_type("compaction_start") == []
    assert seen and all("note" not in roles for roles in seen)


async def test_a_compacted_run_with_tool_calls_keeps_every_pair_whole() -> None:
    from mainspring import tool

    @tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    provider = FauxProvider(
        [faux.tool_call("echo", {"text": "hi"}), faux.tool_call("echo", {"text": "ho"}), "done"]
    )
    agent = Agent(
        model=SMALL_MODEL,
        provider=provider,
        messages=long_history(),
        tools=[echo],
        autoload=False,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt(PROMPT)
    check_event_grammar(recorder.events)
    assert len(recorder.of_type("compaction_start")) == 1  # later turns fit
    assert transcript_problem(agent.state.messages) is None
    for request in provider.requests:
        assert transcript_problem(request.messages, llm_only=True) is None
    assert text_of(agent.state.messages[-1]) == "done"


# == plugin compaction ==================================================================


class Summariser:
    """Keeps everything from the newest user message behind a marker of its own."""

    name = "summariser"

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    @hookimpl
    async def compact(
        self, messages: tuple[Any, ...], model: Model, reason: str, agent: Any, signal: Any
    ) -> CompactionResult:
        self.calls.append({"messages": messages, "model": model, "reason": reason, "agent": agent})
        cut = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        marker = CompactionSummary(summary="PLUGIN SUMMARY", removed=cut)
        return CompactionResult((marker, *messages[cut:]), summary="PLUGIN SUMMARY")


async def test_a_plugin_compact_wins_over_the_fallback() -> None:
    plugin = Summariser()
    history = long_history()
    agent, recorder, provider = await run([faux.text("done")], messages=history, plugins=(plugin,))

    [call] = plugin.calls
    assert call["reason"] == "threshold"
    assert call["model"] == SMALL_MODEL
    # a plugin sees the agent through its own view
    assert call["agent"] is agent.view_for("summariser")
    assert isinstance(call["messages"], tuple)
    assert list(call["messages"]) == [*history, call["messages"][-1]]
    assert text_of(call["messages"][-1]) == PROMPT

    messages = agent.state.messages
    assert [type(m).__name__ for m in messages] == [
        "CompactionSummary",
        "UserMessage",
        "AssistantMessage",
    ]
    assert messages[0].summary == "PLUGIN SUMMARY"
    assert "no summary is available" not in text_of(provider.requests[0].messages[0])
    assert "PLUGIN SUMMARY" in text_of(provider.requests[0].messages[0])
    [end] = recorder.of_type("compaction_end")
    assert end.error is None
    assert end.plugin == "summariser"
    assert end.tokens_after < end.tokens_before
    assert recorder.of_type("hook_error") == []


async def test_a_plugin_returning_none_leaves_it_to_the_fallback() -> None:
    class Pass:
        name = "pass"

        @hookimpl
        def compact(self, messages: tuple[Any, ...]) -> None:
            return None

    agent, recorder, _ = await run([faux.text("done")], plugins=(Pass(),))
    assert "no summary is available" in agent.state.messages[0].summary
    assert recorder.of_type("compaction_end")[0].error is None


def assert_uncompacted(
    agent: Agent, recorder: EventRecorder, provider: FauxProvider, history: list[Any]
) -> None:
    """The run went on with the whole transcript and ended normally."""
    messages = agent.state.messages
    assert list(messages[: len(history)]) == history
    assert not any(isinstance(m, CompactionSummary) for m in messages)
    assert text_of(messages[-1]) == "done"
    [request] = provider.requests
    assert len(request.messages) == len(history) + 1
    [end] = recorder.of_type("agent_end")
    assert end.reason == "stop"
    assert phases(recorder) == [
        ("idle", "turn"),
        ("turn", "compaction"),
        ("compaction", "turn"),
        ("turn", "idle"),
    ]


async def test_a_raising_compact_reports_and_the_run_goes_on_uncompacted() -> None:
    class Broken:
        name = "broken-compactor"

        @hookimpl
        async def compact(self, messages: tuple[Any, ...]) -> CompactionResult:
            raise RuntimeError("summariser down")

    history = long_history()
    agent, recorder, provider = await run(
        [faux.text("done")], messages=history, plugins=(Broken(),)
    )

    [error] = recorder.of_type("hook_error")
    assert error.hook == "compact"
    assert error.plugin == "broken-compactor"
    assert "summariser down" in error.error
    [start] = recorder.of_type("compaction_start")
    [end] = recorder.of_type("compaction_end")
    assert end.error is not None and "summariser down" in end.error
    assert end.plugin == "broken-compactor"
    assert end.tokens_after == end.tokens_before == start.tokens_before
    types = recorder.types()
    assert (
        types.index("compaction_start") < types.index("hook_error") < types.index("compaction_end")
    )
    assert_uncompacted(agent, recorder, provider, history)


def _drop_tool_call(messages: tuple[Any, ...]) -> tuple[Any, ...]:
    """Keep a tool result but drop the call it answers."""
    index = next(i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage))
    return (CompactionSummary(summary="cut", removed=index), *messages[index:])


def _drop_tool_result(messages: tuple[Any, ...]) -> tuple[Any, ...]:
    """Keep a tool call but drop its result."""
    index = next(i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage))
    return (*messages[:index], *messages[index + 1 :])


@pytest.mark.parametrize("split", [_drop_tool_call, _drop_tool_result])
async def test_a_compact_result_that_splits_a_tool_pair_is_a_plugin_failure(split: Any) -> None:
    class Splitter:
        name = "splitter"

        @hookimpl
        def compact(self, messages: tuple[Any, ...]) -> CompactionResult:
            return CompactionResult(split(messages), summary="cut")

    history = long_history()
    agent, recorder, provider = await run(
        [faux.text("done")], messages=history, plugins=(Splitter(),)
    )
    [error] = recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("compact", "splitter")
    assert "broke the transcript" in error.error
    [end] = recorder.of_type("compaction_end")
    assert end.error is not None and "broke the transcript" in end.error
    assert_uncompacted(agent, recorder, provider, history)


async def test_a_compact_returning_something_else_is_a_plugin_failure() -> None:
    class Wrong:
        name = "wrong-type"

        @hookimpl
        def compact(self, messages: tuple[Any, ...]) -> Any:
            return list(messages[-2:])  # not a CompactionResult

    history = long_history()
    agent, recorder, provider = await run([faux.text("done")], messages=history, plugins=(Wrong(),))
    [error] = recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("compact", "wrong-type")
    assert recorder.of_type("compaction_end")[0].error
    assert_uncompacted(agent, recorder, provider, history)


async def test_when_nothing_can_be_cut_compaction_ends_with_an_error() -> None:
    # a single huge prompt: the fallback finds no cut point and passes
    provider = FauxProvider([faux.text("done")])
    agent = Agent(model=SMALL_MODEL, provider=provider, autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("p" * 8_000)
    check_event_grammar(recorder.events)
    [end] = recorder.of_type("compaction_end")
    assert end.error
    assert end.tokens_after == end.tokens_before
    assert text_of(agent.state.messages[-1]) == "done"
    assert len(agent.state.messages) == 2


# == overflow ===========================================================================


async def test_a_context_overflow_gives_one_compaction_and_one_resend() -> None:
    history = short_history()
    agent, recorder, provider = await run(
        [faux.error("prompt is too long", status_code=400, context_overflow=True), "fits now"],
        messages=history,
        model="faux:big",  # 128k window: no threshold compaction
    )
    [start] = recorder.of_type("compaction_start")
    [end] = recorder.of_type("compaction_end")
    assert start.reason == end.reason == "overflow"
    assert end.error is None
    assert recorder.of_type("retry") == []
    assert phases(recorder) == [
        ("idle", "turn"),
        ("turn", "compaction"),
        ("compaction", "turn"),
        ("turn", "idle"),
    ]
    first, second = provider.requests
    assert len(first.messages) == len(history) + 1
    assert "compacted" in text_of(second.messages[0])
    assert text_of(second.messages[-1]) == PROMPT

    messages = agent.state.messages
    assert isinstance(messages[0], CompactionSummary)
    assert text_of(messages[-1]) == "fits now"
    assert transcript_problem(messages) is None
    # the failed attempt streamed nothing and left no message
    assert [m.stop_reason for m in recorder.messages("assistant")] == ["stop"]
    assert recorder.of_type("agent_end")[0].reason == "stop"


async def test_a_second_overflow_ends_the_run_with_an_error() -> None:
    overflow = faux.error("prompt is too long", status_code=400, context_overflow=True)
    agent, recorder, provider = await run(
        [overflow, overflow, "never sent"], messages=short_history(), model="faux:big"
    )
    assert len(recorder.of_type("compaction_start")) == 1
    assert len(provider.requests) == 2
    assert provider.remaining == 1
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error"
    assert last.error_message and "prompt is too long" in last.error_message
    [end] = recorder.of_type("agent_end")
    assert end.reason == "error"
    assert end.detail and "prompt is too long" in end.detail
    assert agent.state.error_message == end.detail
    assert isinstance(agent.state.messages[0], CompactionSummary)


async def test_an_overflow_whose_compaction_fails_ends_the_run_with_an_error() -> None:
    class Broken:
        name = "broken-compactor"

        @hookimpl
        def compact(self, messages: tuple[Any, ...]) -> None:
            raise RuntimeError("no")

    overflow = faux.error("prompt is too long", context_overflow=True)
    agent, recorder, provider = await run(
        [overflow, "never sent"], messages=short_history(), model="faux:big", plugins=(Broken(),)
    )
    assert len(provider.requests) == 1
    assert recorder.of_type("compaction_end")[0].error
    assert [e.plugin for e in recorder.of_type("hook_error")] == ["broken-compactor"]
    last = agent.state.messages[-1]
    assert last.stop_reason == "error"
    assert "prompt is too long" in (last.error_message or "")
    assert recorder.of_type("agent_end")[0].reason == "error"


async def test_an_overflow_with_compaction_disabled_is_an_error_at_once() -> None:
    settings = Settings(compaction=CompactionSettings(enabled=False))
    overflow = faux.error("prompt is too long", context_overflow=True)
    agent, recorder, provider = await run(
        [overflow, "never sent"], messages=short_history(), model="faux:big", settings=settings
    )
    assert recorder.of_type("compaction_start") == []
    assert len(provider.requests) == 1
    assert agent.state.messages[-1].stop_reason == "error"
    assert recorder.of_type("agent_end")[0].reason == "error"


async def test_threshold_then_overflow_compacts_once_for_each_request() -> None:
    overflow = faux.error("prompt is too long", context_overflow=True)
    agent, recorder, provider = await run([overflow, "fits now"])
    assert [e.reason for e in recorder.of_type("compaction_start")] == ["threshold", "overflow"]
    assert len(provider.requests) == 2
    assert text_of(agent.state.messages[-1]) == "fits now"
    assert transcript_problem(agent.state.messages) is None


async def test_a_retried_request_is_not_compacted_again() -> None:
    settings = Settings(retry=RetrySettings(base_delay_s=0.001))
    busy = faux.error("overloaded", retryable=True, status_code=529, retry_after=0.0)
    _agent, recorder, provider = await run([busy, "done"], settings=settings)
    assert len(recorder.of_type("compaction_start")) == 1
    assert len(recorder.of_type("retry")) == 1
    first, second = provider.requests
    assert first.messages == second.messages
    assert "compacted" in text_of(second.messages[0])
    assert phases(recorder) == [
        ("idle", "turn"),
        ("turn", "compaction"),
        ("compaction", "turn"),
        ("turn", "retry"),
        ("retry", "turn"),
        ("turn", "idle"),
    ]


# == repeated compaction and usage ======================================================


async def test_a_second_compaction_folds_the_earlier_marker_in() -> None:
    history = [CompactionSummary(summary="before", removed=40), *long_history()]
    agent, _recorder, _ = await run([faux.text("done")], messages=history)
    messages = agent.state.messages
    assert isinstance(messages[0], CompactionSummary)
    assert sum(isinstance(m, CompactionSummary) for m in messages) == 1
    kept = len(messages) - 2  # all but the new marker and the reply
    dropped = len(history) - 1 + 1 - kept  # the old marker is not a message it drops
    assert messages[0].removed == 40 + dropped  # the old marker's 40 carry over


async def test_compaction_reduces_the_count_when_the_history_reported_usage() -> None:
    """A transcript from real runs: assistant messages carry the usage of their request.

    The estimate trusts the newest reported usage for everything before it; after a
    compaction that usage describes a context that no longer exists.
    """
    from mainspring import Usage

    history: list[Any] = []
    total = 0
    for index in range(12):
        question = UserMessage(content=f"question {index} " + "q" * 300)
        total += 80
        answer = AssistantMessage(
            content=(TextContent(text=f"answer {index} " + "a" * 300),),
            provider="faux",
            model="t",
            stop_reason="stop",
            usage=Usage(input_tokens=total, output_tokens=80),
        )
        total += 80
        history += [question, answer]
    agent, recorder, _provider = await run([faux.text("done")], messages=history)
    [end] = recorder.of_type("compaction_end")
    assert end.error is None
    assert end.tokens_after < end.tokens_before
    assert end.tokens_after <= THRESHOLD
    assert transcript_problem(agent.state.messages) is None


# == abort ==============================================================================


async def _abort_during_compaction(plugin: Any) -> tuple[Agent, EventRecorder, float]:
    import asyncio

    provider = FauxProvider([faux.text("never sent")])
    agent = Agent(
        model=SMALL_MODEL,
        provider=provider,
        messages=long_history(),
        plugins=(plugin,),
        autoload=False,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    task = asyncio.ensure_future(agent.prompt(PROMPT))
    await plugin.entered.wait()
    started = time.monotonic()
    agent.abort()
    await asyncio.wait_for(task, timeout=5)
    elapsed = time.monotonic() - started
    check_event_grammar(recorder.events)
    assert provider.requests == []
    return agent, recorder, elapsed


async def test_abort_during_a_compact_that_honours_the_signal() -> None:
    import asyncio

    class Patient:
        name = "patient"

        def __init__(self) -> None:
            self.entered = asyncio.Event()

        @hookimpl
        async def compact(self, messages: tuple[Any, ...], signal: Any) -> None:
            self.entered.set()
            await signal.wait()
            return None

    agent, recorder, elapsed = await _abort_during_compaction(Patient())
    assert elapsed < 1
    [end] = recorder.of_type("agent_end")
    assert end.reason == "aborted"
    assert agent.state.messages[-1].stop_reason == "aborted"
    [compaction_end] = recorder.of_type("compaction_end")
    assert compaction_end.error
    assert not any(isinstance(m, CompactionSummary) for m in agent.state.messages)


async def test_abort_during_a_compact_that_ignores_the_signal_does_not_hang() -> None:
    """DESIGN §7 "Abort never hangs"; §9: the retry sleep ends at once on abort.

    A compaction plugin may call a model for a summary (seconds to minutes); an abort
    must not wait for it.
    """
    import asyncio

    class Stubborn:
        name = "stubborn"

        def __init__(self) -> None:
            self.entered = asyncio.Event()

        @hookimpl
        async def compact(self, messages: tuple[Any, ...]) -> None:
            self.entered.set()
            await asyncio.sleep(3)  # a slow summary call that does not look at the signal
            return None

    agent, recorder, elapsed = await _abort_during_compaction(Stubborn())
    assert recorder.of_type("agent_end")[0].reason == "aborted"
    assert elapsed < 1, f"abort() took {elapsed:.1f}s: it waited for the compact hook"
    [end] = recorder.of_type("compaction_end")
    assert end.error  # interrupted: nothing was replaced
    assert not any(isinstance(m, CompactionSummary) for m in agent.state.messages)
    assert agent.state.messages[-1].stop_reason == "aborted"


# == custom messages inside a tool batch ================================================


async def test_the_fallback_does_not_cut_between_a_call_and_its_result_at_a_custom_message() -> (
    None
):
    """The invariants accept a custom message between a tool call and its result.

    The fallback must not cut there: the kept tail would start with an orphan result.
    Here the only cut that fits the budget falls on the note.
    """
    history = [
        UserMessage(content="q" * 4_000),
        assistant(
            ToolCall(id="big", name="echo", arguments={"text": "x" * 3_200}),
            stop_reason="tool_use",
        ),
        Note(text="a plugin's note, written while the tool ran"),
        ToolResultMessage(
            tool_call_id="big", tool_name="echo", content=(TextContent(text="ok"),), is_error=False
        ),
    ]
    assert transcript_problem(history) is None
    agent, recorder, _provider = await run([faux.text("done")], messages=history)
    assert recorder.of_type("hook_error") == [], recorder.of_type("hook_error")
    [end] = recorder.of_type("compaction_end")
    assert end.error is None
    assert isinstance(agent.state.messages[0], CompactionSummary)
    assert transcript_problem(agent.state.messages) is None


# == sessions ===========================================================================


async def test_a_compaction_is_recorded_in_the_session_file(tmp_path: Any) -> None:
    path = tmp_path / "session.jsonl"
    settings = Settings(session_path=str(path))
    agent, _, _ = await run([faux.text("done")], settings=settings)
    assert isinstance(agent.state.messages[0], CompactionSummary)

    resumed = Agent.from_session(path, provider=FauxProvider(), autoload=False)
    assert list(resumed.state.messages) == list(agent.state.messages)


async def test_a_counter_without_an_opinion_leaves_the_builtin_estimate() -> None:
    """A ``count_tokens`` plugin returning ``None`` changes nothing: compaction starts at
    the same size as with no counter at all, measured by the kernel's estimate."""

    class NoOpinion:
        @hookimpl
        def count_tokens(self, messages):
            return None

    _, alone, _ = await run([faux.text("hi")])
    _, counted, _ = await run([faux.text("hi")], plugins=(NoOpinion(),))

    before = [event.tokens_before for event in alone.of_type("compaction_start")]
    assert before and before[0] > THRESHOLD
    assert [event.tokens_before for event in counted.of_type("compaction_start")] == before
