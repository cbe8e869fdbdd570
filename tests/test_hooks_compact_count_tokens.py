"""count_tokens and compact: deciding on and performing compaction.

Hook table (DESIGN §6, §9, §15):

- ``count_tokens(messages, model)``: synchronous; before each request, on the messages
  about to be sent (after ``transform_context`` and ``convert_to_llm``); first non-``None``
  wins; a raising implementation emits ``hook_error`` and the built-in estimate is used.
- ``compact(messages, model, reason, agent, signal)``: in the ``compaction`` phase; first
  non-``None`` ``CompactionResult`` wins (its ``messages`` become the transcript); the
  built-in fallback is ``trylast``; a failure emits ``hook_error`` and ``compaction_end``
  with ``error`` and the run continues uncompacted; a result that breaks the transcript
  invariants counts as a failure. Reasons ``threshold`` and ``overflow``; at most one
  compaction per request.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from mainspring import (
    Agent,
    AssistantMessage,
    CompactionResult,
    CompactionSummary,
    Model,
    PluginLoadError,
    Settings,
    StopRun,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    hookimpl,
)
from mainspring.testing import EventRecorder, FauxProvider, faux, scripted_run

HUGE = 10_000_000  # far above any context window
SMALL = 10


class Note(BaseModel):
    model_config = ConfigDict(frozen=True)
    role: Literal["note"] = "note"
    text: str
    timestamp: float = Field(default_factory=time.time)


def history() -> list[Any]:
    """Two earlier exchanges, the first with a tool call and its result."""
    return [
        UserMessage(content="old question"),
        AssistantMessage(
            content=(ToolCall(id="old1", name="echo", arguments={"text": "a"}),),
            provider="faux",
            model="test",
            stop_reason="tool_use",
        ),
        ToolResultMessage(
            tool_call_id="old1", tool_name="echo", content=(TextContent(text="a"),), is_error=False
        ),
        AssistantMessage(
            content=(TextContent(text="old answer"),),
            provider="faux",
            model="test",
            stop_reason="stop",
        ),
        UserMessage(content="second question"),
        AssistantMessage(
            content=(TextContent(text="second answer"),),
            provider="faux",
            model="test",
            stop_reason="stop",
        ),
    ]


class Huge:
    """Says the context is too big until the transcript was compacted."""

    name = "huge-counter"

    @hookimpl(tryfirst=True)
    def count_tokens(self, messages):
        compacted = any("[summary]" in _text(m) for m in messages)
        return SMALL if compacted else HUGE


def _text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return "".join(getattr(block, "text", "") for block in content)


def keep_last_prompt(messages: tuple[Any, ...], summary: str = "[summary] earlier talk") -> Any:
    """A compaction result: a summary plus everything from the newest user message."""
    cut = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    marker = CompactionSummary(summary=summary, removed=cut)
    return CompactionResult((marker, *messages[cut:]), summary=summary)


async def run_agent(
    plugins: list[Any], steps: list[Any], messages: Any = None, **kwargs: Any
) -> tuple[Agent, EventRecorder, FauxProvider]:
    messages = history() if messages is None else messages
    return await scripted_run(steps, "new question", plugins=plugins, messages=messages, **kwargs)


@contextmanager
def no_unawaited_coroutines() -> Iterator[None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    leaked = [w for w in caught if "never awaited" in str(w.message)]
    assert not leaked, [str(w.message) for w in leaked]


# == count_tokens =======================================================================


async def test_the_builtin_estimate_answers_when_no_plugin_does() -> None:
    seen: list[int] = []

    class Pass:
        @hookimpl
        def count_tokens(self, messages):
            seen.append(len(messages))
            return None

    _, recorder, provider = await run_agent([Pass()], [faux.text("hi")])

    assert seen == [7]
    assert recorder.of_type("compaction_start") == []
    assert recorder.of_type("hook_error") == []
    assert len(provider.requests) == 1


async def test_the_first_count_wins_and_later_ones_are_not_called() -> None:
    later: list[str] = []

    class Later:
        @hookimpl
        def count_tokens(self):
            later.append("called")
            return SMALL

    class Compactor:
        @hookimpl
        def compact(self, messages):
            return keep_last_prompt(messages)

    _, recorder, _ = await run_agent([Later(), Compactor(), Huge()], [faux.text("hi")])

    start = recorder.of_type("compaction_start")[0]
    assert start.tokens_before == HUGE
    # Huge answered both counts (before and after compaction); Later never ran
    assert later == []
    assert recorder.of_type("compaction_end")[0].tokens_after == SMALL


async def test_count_tokens_sees_the_projected_llm_messages_and_the_model() -> None:
    seen: dict[str, Any] = {}

    class Inject:
        @hookimpl
        def transform_context(self, messages):
            return (*messages, UserMessage(content="injected"))

    class Spy:
        @hookimpl
        def count_tokens(self, messages, model):
            seen.update(messages=messages, model=model)

    history_with_note = [*history(), Note(text="custom")]
    _, _, provider = await run_agent(
        [Spy(), Inject()], [faux.text("hi")], messages=history_with_note
    )

    assert isinstance(seen["messages"], tuple)
    roles = [m.role for m in seen["messages"]]
    assert "note" not in roles  # convert_to_llm already dropped it
    assert seen["messages"][-1].content == "injected"
    assert seen["messages"] == provider.requests[0].messages
    assert isinstance(seen["model"], Model) and seen["model"].id == "test"


def test_an_async_count_tokens_is_rejected_at_load_time() -> None:
    class AsyncCounter:
        @hookimpl
        async def count_tokens(self, messages):
            return 1

    with pytest.raises(PluginLoadError) as caught:
        Agent(
            provider=FauxProvider([]), model="faux:test", plugins=[AsyncCounter()], autoload=False
        )

    assert "AsyncCounter" in str(caught.value)
    assert "count_tokens" in str(caught.value)
    assert caught.value.plugin == "AsyncCounter"


async def test_a_raising_counter_is_reported_and_the_estimate_is_used() -> None:
    class Broken:
        name = "tiktoken-counter"

        @hookimpl(tryfirst=True)
        def count_tokens(self):
            raise LookupError("unknown encoding")

    _, recorder, provider = await run_agent([Broken()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert error.hook == "count_tokens"
    assert error.plugin == "tiktoken-counter"
    assert "unknown encoding" in error.error
    assert "estimate" in error.outcome
    assert recorder.of_type("compaction_start") == []  # the small estimate decided
    assert recorder.of_type("agent_end")[0].reason == "stop"
    assert len(provider.requests) == 1


async def test_a_raising_counter_does_not_stop_the_next_one() -> None:
    class Broken:
        name = "broken"

        @hookimpl(tryfirst=True)
        def count_tokens(self):
            raise RuntimeError("x")

    class Compactor:
        @hookimpl
        def compact(self, messages):
            return keep_last_prompt(messages)

    _, recorder, _ = await run_agent([Compactor(), Huge(), Broken()], [faux.text("hi")])

    assert [e.plugin for e in recorder.of_type("hook_error")] == ["broken", "broken"]
    assert recorder.of_type("compaction_start")[0].tokens_before == HUGE


@pytest.mark.parametrize("wrong", ["12", 1.5, True, [3]])
async def test_a_counter_returning_a_non_int_is_reported(wrong: Any) -> None:
    class Wrong:
        name = "wrong"

        @hookimpl(tryfirst=True)
        def count_tokens(self):
            return wrong

    _, recorder, _ = await run_agent([Wrong()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("count_tokens", "wrong")
    assert recorder.of_type("compaction_start") == []


async def test_count_tokens_tryfirst_and_trylast_are_honoured() -> None:
    order: list[str] = []

    def plugin(label: str, **marks: bool) -> Any:
        class P:
            name = label

            @hookimpl(**marks)
            def count_tokens(self):
                order.append(label)

        return P()

    plugins = [plugin("first", tryfirst=True), plugin("mid-a"), plugin("mid-b")]
    await run_agent(plugins, [faux.text("hi")])

    assert order == ["first", "mid-b", "mid-a"]


async def test_stop_run_from_count_tokens_is_a_deliberate_stop() -> None:
    class Budget:
        @hookimpl(tryfirst=True)
        def count_tokens(self, messages):
            raise StopRun("request too expensive")

    _agent, recorder, provider = await run_agent([Budget()], [faux.text("never")])

    end = recorder.of_type("agent_end")[0]
    assert (end.reason, end.detail) == ("stopped_by_hook", "request too expensive")
    assert provider.requests == []
    assert recorder.of_type("hook_error") == []


# == compact ============================================================================


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_compaction_result_becomes_the_transcript(kind: str) -> None:
    if kind == "sync":

        class Summary:
            name = "summary"

            @hookimpl
            def compact(self, messages, reason):
                assert reason == "threshold"
                return keep_last_prompt(messages)

    else:

        class Summary:  # type: ignore[no-redef]
            name = "summary"

            @hookimpl
            async def compact(self, messages, reason):
                assert reason == "threshold"
                return keep_last_prompt(messages)

    agent, recorder, provider = await run_agent([Summary(), Huge()], [faux.text("hi")])

    assert [m.role for m in agent.state.messages] == ["compaction", "user", "assistant"]
    assert agent.state.messages[0].summary == "[summary] earlier talk"
    start, end = recorder.of_type("compaction_start")[0], recorder.of_type("compaction_end")[0]
    assert (start.reason, end.reason) == ("threshold", "threshold")
    assert (end.tokens_before, end.tokens_after, end.error) == (HUGE, SMALL, None)
    # the request went out compacted; the summary was rendered for the model
    sent = provider.requests[0].messages
    assert [m.role for m in sent] == ["user", "user"]
    assert "[summary] earlier talk" in sent[0].content
    phases = [(e.previous, e.phase) for e in recorder.of_type("phase_change")]
    assert ("turn", "compaction") in phases and ("compaction", "turn") in phases
    assert recorder.of_type("agent_end")[0].reason == "stop"


async def test_compact_gets_the_whole_transcript_model_reason_agent_and_signal() -> None:
    seen: dict[str, Any] = {}

    class Spy:
        @hookimpl
        def compact(self, messages, model, reason, agent, signal):
            seen.update(messages=messages, model=model, reason=reason, agent=agent, signal=signal)
            return keep_last_prompt(messages)

    agent_history = [*history(), Note(text="custom")]
    agent, _, _ = await run_agent([Spy(), Huge()], [faux.text("hi")], messages=agent_history)

    assert isinstance(seen["messages"], tuple)
    # the whole transcript, custom messages included, not the projection
    assert [m.role for m in seen["messages"]][-2:] == ["note", "user"]
    assert len(seen["messages"]) == 8
    assert seen["model"].id == "test"
    assert seen["reason"] == "threshold"
    # a plugin sees the agent through its own view
    assert seen["agent"] is agent.view_for("Spy")
    assert seen["signal"].aborted is False


@pytest.mark.parametrize("later_kind", ["sync", "async"])
async def test_the_first_result_wins_and_later_compactors_are_not_called(
    later_kind: str,
) -> None:
    later: list[str] = []

    class First:
        name = "first"

        @hookimpl
        async def compact(self, messages):
            return keep_last_prompt(messages, "[summary] by first")

    if later_kind == "sync":

        class Later:
            @hookimpl
            def compact(self, messages):
                later.append("called")
                return keep_last_prompt(messages, "[summary] by later")

    else:

        class Later:  # type: ignore[no-redef]
            @hookimpl
            async def compact(self, messages):
                later.append("called")
                return keep_last_prompt(messages, "[summary] by later")

    with no_unawaited_coroutines():
        agent, _, _ = await run_agent([Later(), First(), Huge()], [faux.text("hi")])

    assert later == []
    assert agent.state.messages[0].summary == "[summary] by first"


async def test_none_passes_on_down_to_the_builtin_fallback() -> None:
    asked: list[str] = []

    class Pass:
        @hookimpl
        def compact(self):
            asked.append("pass")

    class AlwaysHuge:
        @hookimpl(tryfirst=True)
        def count_tokens(self):
            return HUGE

    agent, recorder, provider = await run_agent([Pass(), AlwaysHuge()], [faux.text("hi")])

    assert asked == ["pass"]
    end = recorder.of_type("compaction_end")[0]
    assert end.error is None
    marker = agent.state.messages[0]
    assert isinstance(marker, CompactionSummary)  # the fallback's marker
    assert agent.state.messages[-1].text == "hi"
    assert len(provider.requests) == 1  # at most one compaction per request


async def test_the_builtin_fallback_runs_after_a_plugins_trylast_compactor() -> None:
    """The hookspec: "A built-in ``trylast`` fallback drops the oldest whole turns" — the
    overridable default. A plugin compactor marked ``trylast`` must still run before it."""
    asked: list[str] = []

    class LateSummary:
        @hookimpl(trylast=True)
        def compact(self, messages):
            asked.append("late")
            return keep_last_prompt(messages, "[summary] late")

    agent, _, _ = await run_agent([LateSummary(), Huge()], [faux.text("hi")])

    assert asked == ["late"]
    assert agent.state.messages[0].summary == "[summary] late"


async def test_compaction_happens_at_most_once_per_request() -> None:
    class AlwaysHuge:
        @hookimpl(tryfirst=True)
        def count_tokens(self):
            return HUGE

    class Compactor:
        @hookimpl
        def compact(self, messages):
            return keep_last_prompt(messages)

    _, recorder, provider = await run_agent([Compactor(), AlwaysHuge()], [faux.text("hi")])

    assert len(recorder.of_type("compaction_start")) == 1
    assert len(provider.requests) == 1


async def test_a_context_overflow_triggers_one_compaction_and_a_resend() -> None:
    reasons: list[str] = []

    class Compactor:
        @hookimpl
        def compact(self, messages, reason):
            reasons.append(reason)
            return keep_last_prompt(messages)

    steps = [faux.error("prompt is too long", context_overflow=True), faux.text("fits now")]
    agent, recorder, provider = await run_agent([Compactor()], steps)

    assert reasons == ["overflow"]
    assert recorder.of_type("compaction_start")[0].reason == "overflow"
    assert len(provider.requests) == 2
    assert [m.role for m in agent.state.messages] == ["compaction", "user", "assistant"]
    assert agent.state.messages[-1].text == "fits now"
    assert recorder.of_type("agent_end")[0].reason == "stop"


async def test_compaction_is_not_attempted_when_disabled() -> None:
    asked: list[str] = []

    class Compactor:
        @hookimpl
        def compact(self):
            asked.append("called")

    _, recorder, _ = await run_agent(
        [Compactor(), Huge()], [faux.text("hi")], settings=Settings(compaction={"enabled": False})
    )

    assert asked == []
    assert recorder.of_type("compaction_start") == []


# -- compact failures -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_raising_compactor_leaves_the_transcript_and_the_run_goes_on(kind: str) -> None:
    if kind == "sync":

        class Broken:
            name = "llm-summary"

            @hookimpl
            def compact(self, messages):
                raise TimeoutError("summary model timed out")

    else:

        class Broken:  # type: ignore[no-redef]
            name = "llm-summary"

            @hookimpl
            async def compact(self, messages):
                raise TimeoutError("summary model timed out")

    with no_unawaited_coroutines():
        agent, recorder, provider = await run_agent([Broken(), Huge()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert error.hook == "compact"
    assert error.plugin == "llm-summary"
    assert "summary model timed out" in error.error
    end = recorder.of_type("compaction_end")[0]
    assert end.error and "summary model timed out" in end.error
    # uncompacted: the whole history is still there, and the request was sent
    assert [m.role for m in agent.state.messages][:7] == [m.role for m in history()] + ["user"]
    assert len(provider.requests) == 1
    assert recorder.of_type("agent_end")[0].reason == "stop"


async def test_a_compaction_that_splits_a_call_from_its_result_is_rejected() -> None:
    class Splitter:
        name = "splitter"

        @hookimpl
        def compact(self, messages):
            # keeps the old tool call but drops its result
            kept = tuple(m for m in messages if not isinstance(m, ToolResultMessage))
            return CompactionResult(kept)

    agent, recorder, _ = await run_agent([Splitter(), Huge()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("compact", "splitter")
    assert recorder.of_type("compaction_end")[0].error
    assert any(isinstance(m, ToolResultMessage) for m in agent.state.messages)
    assert recorder.of_type("agent_end")[0].reason == "stop"


@pytest.mark.parametrize("wrong", [["a list"], "text", 3])
async def test_a_compactor_returning_something_else_is_rejected(wrong: Any) -> None:
    class Wrong:
        name = "wrong"

        @hookimpl
        def compact(self):
            return wrong

    agent, recorder, _ = await run_agent([Wrong(), Huge()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("compact", "wrong")
    assert recorder.of_type("compaction_end")[0].error
    assert len(agent.state.messages) == len(history()) + 2


async def test_stop_run_from_compact_is_a_deliberate_stop() -> None:
    class Refuse:
        @hookimpl
        async def compact(self):
            raise StopRun("context full; ask the user")

    agent, recorder, provider = await run_agent([Refuse(), Huge()], [faux.text("never")])

    end = recorder.of_type("agent_end")[0]
    assert (end.reason, end.detail) == ("stopped_by_hook", "context full; ask the user")
    assert provider.requests == []
    assert agent.state.phase == "idle"
