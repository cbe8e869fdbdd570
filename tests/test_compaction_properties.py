"""Properties of the fallback compaction over random transcripts (hypothesis).

A transcript here is what the kernel produces: user messages, assistant messages with
0..3 tool calls each followed by exactly one result per call, failed assistant messages
(no tool calls), custom messages between those, optionally led by earlier compaction
markers, some assistant messages carrying usage. For every such transcript:

- ``safe_cut_points``/``cut_index`` only cut where the tail is a valid transcript;
- the fallback ``compact`` either passes (``None``, nothing to cut) or returns a marker
  plus a suffix of the transcript that passes ``transcript_problem``, keeps the newest
  message, and counts what it removed;
- a whole run over such a transcript with a small window keeps the event grammar and a
  valid transcript.

The hook contract (DESIGN §9, hookspecs ``compact``) says a tool call and its result are
never split, for any transcript the kernel accepts; the last property checks that for
custom messages placed anywhere ``transcript_problem`` allows, also inside a tool batch.
"""

from __future__ import annotations

import asyncio
import time
from functools import cache
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from mainspring import (
    Agent,
    AssistantMessage,
    CompactionSummary,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from mainspring.estimate import estimate_tokens, tail_tokens
from mainspring.invariants import transcript_problem
from mainspring.plugins.compaction import compact, cut_index, safe_cut_points
from mainspring.plugins.convert import convert_to_llm
from mainspring.settings import CompactionSettings, Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

EXAMPLES = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Note(BaseModel):
    """A custom message type, as a plugin would keep in the transcript."""

    model_config = ConfigDict(frozen=True)
    role: Literal["note"] = "note"
    text: str
    timestamp: float = Field(default_factory=time.time)


texts = st.text(alphabet="abc xyz", min_size=0, max_size=400)


@st.composite
def exchanges(draw: st.DrawFn, ids: list[int], notes_inside: bool = False) -> list[Any]:
    """One transcript unit: a user message, a note, or an assistant reply with its results."""
    kind = draw(st.sampled_from(["user", "note", "assistant", "assistant", "failed"]))
    if kind == "user":
        return [UserMessage(content=draw(texts))]
    if kind == "note":
        return [Note(text=draw(texts))]
    if kind == "failed":
        reason = draw(st.sampled_from(["error", "aborted"]))
        return [
            AssistantMessage(
                content=(TextContent(text=draw(texts)),),
                provider="faux",
                model="t",
                stop_reason=reason,
                error_message="failed",
            )
        ]
    calls = []
    for _ in range(draw(st.integers(0, 3))):
        ids[0] += 1
        calls.append(ToolCall(id=f"c{ids[0]}", name="echo", arguments={"text": draw(texts)}))
    usage = draw(
        st.one_of(
            st.just(Usage()),
            st.builds(Usage, input_tokens=st.integers(1, 3_000), output_tokens=st.integers(1, 500)),
        )
    )
    message = AssistantMessage(
        content=(TextContent(text=draw(texts)), *calls),
        provider="faux",
        model="t",
        stop_reason="tool_use" if calls else "stop",
        usage=usage,
    )
    unit: list[Any] = [message]
    for call in calls:
        if notes_inside and draw(st.booleans()):
            unit.append(Note(text=draw(texts)))
        unit.append(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name="echo",
                content=(TextContent(text=draw(texts)),),
                is_error=draw(st.booleans()),
            )
        )
    return unit


@st.composite
def transcripts(draw: st.DrawFn, notes_inside: bool = False) -> list[Any]:
    ids = [0]
    messages: list[Any] = [
        CompactionSummary(summary=draw(texts), removed=draw(st.integers(1, 50)))
        for _ in range(draw(st.integers(0, 2)))
    ]
    for unit in draw(st.lists(exchanges(ids, notes_inside), min_size=0, max_size=25)):
        messages += unit
    assert transcript_problem(messages) is None  # the generator makes valid transcripts
    return messages


@cache
def agent_with(keep_recent_tokens: int, window: int) -> Agent:
    """An agent only used as ``compact``'s ``agent`` (its settings) and for ``model``."""
    return Agent(
        model=Model(provider="faux", id="t", context_window=window),
        provider=FauxProvider(),
        autoload=False,
        settings=Settings(compaction=CompactionSettings(keep_recent_tokens=keep_recent_tokens)),
    )


keep_recent = st.sampled_from([0, 50, 200, 1_000, 20_000])
windows = st.sampled_from([400, 2_000, 8_000, 128_000])


# == the helpers ========================================================================


@EXAMPLES
@given(transcripts())
def test_safe_cut_points_leave_a_valid_tail(messages: list[Any]) -> None:
    points = safe_cut_points(messages)
    assert points == sorted(set(points))
    for point in points:
        assert 0 < point < len(messages)
        assert not isinstance(messages[point], ToolResultMessage)
        assert transcript_problem(messages[point:]) is None, point


@EXAMPLES
@given(transcripts(), st.integers(0, 5_000))
def test_cut_index_is_a_safe_point_that_fits_or_the_latest(
    messages: list[Any], budget: int
) -> None:
    index = cut_index(messages, budget)
    points = safe_cut_points(messages)
    if not points:
        assert index is None
        return
    assert index in points
    assert transcript_problem(messages[index:]) is None
    # a tail is measured by its own content, never by the usage a kept reply reported
    size = estimate_tokens(messages[index:], reported_usage=False)
    assert size == tail_tokens(messages)[index]
    if size > budget:
        # nothing fits: the shortest tail
        assert index == points[-1]
    else:
        # the earliest (longest) tail that fits
        assert all(
            estimate_tokens(messages[p:], reported_usage=False) > budget
            for p in points
            if p < index
        )


# == the fallback compaction ============================================================


@EXAMPLES
@given(transcripts(), keep_recent, windows, st.sampled_from(["threshold", "overflow"]))
def test_the_fallback_never_splits_a_tool_pair(
    messages: list[Any], keep_recent_tokens: int, window: int, reason: str
) -> None:
    agent = agent_with(keep_recent_tokens, window)
    transcript = tuple(messages)
    result = compact(transcript, agent.state.model, agent)

    leading = 0
    while leading < len(messages) and isinstance(messages[leading], CompactionSummary):
        leading += 1
    body = messages[leading:]
    if result is None:
        assert safe_cut_points(body) == []
        return

    out = list(result.messages)
    assert transcript_problem(out) is None
    marker, tail = out[0], out[1:]
    assert isinstance(marker, CompactionSummary)
    assert result.summary == marker.summary
    assert not any(isinstance(m, CompactionSummary) for m in tail)
    # the tail is a non-empty proper suffix of the body, cut at a safe point
    assert tail
    assert len(tail) < len(body)
    assert tail == body[len(body) - len(tail) :]
    assert tail[-1] is messages[-1]
    assert not isinstance(tail[0], ToolResultMessage)
    # the marker counts everything gone, across earlier compactions
    earlier = sum(m.removed for m in messages[:leading])
    assert marker.removed == earlier + len(body) - len(tail)
    assert marker.tokens_before == estimate_tokens(transcript)
    # no call in the tail lost its result, no result in the tail lost its call
    calls = {c.id for m in tail if isinstance(m, AssistantMessage) for c in m.tool_calls}
    results = {m.tool_call_id for m in tail if isinstance(m, ToolResultMessage)}
    assert calls == results


@EXAMPLES
@given(transcripts(notes_inside=True), keep_recent, windows)
def test_the_fallback_never_splits_a_tool_pair_around_custom_messages(
    messages: list[Any], keep_recent_tokens: int, window: int
) -> None:
    """Custom messages may sit between a call and its results (the invariants allow it)."""
    agent = agent_with(keep_recent_tokens, window)
    result = compact(tuple(messages), agent.state.model, agent)
    if result is not None:
        assert transcript_problem(result.messages) is None


# == whole runs =========================================================================


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), windows)
def test_a_run_over_a_random_transcript_stays_valid(messages: list[Any], window: int) -> None:
    async def scenario() -> tuple[Agent, EventRecorder, FauxProvider]:
        provider = FauxProvider([faux.text("done")])
        agent = Agent(
            model=Model(provider="faux", id="t", context_window=window),
            provider=provider,
            messages=messages,
            autoload=False,
        )
        recorder = EventRecorder()
        agent.subscribe(recorder)
        await agent.prompt("next")
        return agent, recorder, provider

    agent, recorder, provider = asyncio.run(scenario())
    check_event_grammar(recorder.events)
    final = agent.state.messages
    assert transcript_problem(final) is None
    assert recorder.of_type("hook_error") == []
    ends = recorder.of_type("compaction_end")
    assert len(ends) <= 1
    if ends and ends[0].error is None:
        assert isinstance(final[0], CompactionSummary)
        assert ends[0].tokens_after <= ends[0].tokens_before or ends[0].tokens_before < 0
    [request] = provider.requests
    assert transcript_problem(request.messages, llm_only=True) is None
    assert recorder.of_type("agent_end")[0].reason == "stop"


# == usage as real providers report it ==================================================


def content(messages: Any) -> int:
    """The content estimate: what the messages say, whatever usage they carry."""
    return estimate_tokens(list(messages), reported_usage=False)


def sent(messages: Any) -> tuple[Any, ...]:
    """What the default converter sends for ``messages``."""
    converted = convert_to_llm(tuple(messages))
    return tuple(messages) if converted is None else converted


@st.composite
def reported(draw: st.DrawFn) -> list[Any]:
    """A transcript as real providers leave it: every completed reply reports the request
    it answered (a system prompt, then what the converter sent, counted by a tokenizer
    that differs from the estimate) plus its own output; failed replies report nothing."""
    ratio = draw(st.sampled_from([0.5, 1.0, 1.3, 2.0]))
    system = draw(st.integers(0, 1_500))
    out: list[Any] = []
    for message in draw(transcripts()):
        if isinstance(message, AssistantMessage) and message.stop_reason in ("stop", "tool_use"):
            usage = Usage(
                input_tokens=system + int(content(sent(out)) * ratio),
                output_tokens=max(1, int(content([message]) * ratio)),
            )
            message = message.model_copy(update={"usage": usage})  # the same timestamp
        out.append(message)
    return out


@EXAMPLES
@given(reported(), keep_recent, windows)
def test_the_fallback_keeps_the_longest_tail_within_budget(
    messages: list[Any], keep_recent_tokens: int, window: int
) -> None:
    agent = agent_with(keep_recent_tokens, window)
    result = compact(tuple(messages), agent.state.model, agent)
    if result is None:
        return
    budget = min(keep_recent_tokens, (window - min(16_384, window // 4)) // 2)
    body = [m for m in messages if not isinstance(m, CompactionSummary)]
    tail = list(result.messages[1:])
    start = len(body) - len(tail)
    points = safe_cut_points(body)
    assert start in points
    if start != points[-1]:
        assert content(tail) <= budget  # within budget...
    longer = [point for point in points if point < start]
    if longer:
        assert content(body[longer[-1] :]) > budget  # ...and not smaller than needed


@EXAMPLES
@given(reported(), keep_recent, windows, st.sampled_from([0.5, 1.0, 2.0]))
def test_after_a_compaction_the_estimate_is_that_of_what_was_kept(
    messages: list[Any], keep_recent_tokens: int, window: int, ratio: float
) -> None:
    agent = agent_with(keep_recent_tokens, window)
    result = compact(tuple(messages), agent.state.model, agent)
    if result is None:
        return
    kept = result.messages
    # the kept replies' usage described requests that no longer exist
    assert estimate_tokens(kept) == content(kept)
    assert estimate_tokens(sent(kept)) == content(sent(kept))
    # the next reply reports usage for the compacted request: that counts again
    reply = AssistantMessage(
        content=(TextContent(text="next"),),
        provider="faux",
        model="t",
        stop_reason="stop",
        usage=Usage(input_tokens=int(content(sent(kept)) * ratio) + 1, output_tokens=3),
    )
    prompt = UserMessage(content="and then?")
    assert estimate_tokens(sent([*kept, reply])) == reply.usage.total_tokens
    assert estimate_tokens(sent([*kept, reply, prompt])) == (
        reply.usage.total_tokens + content([prompt])
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reported(), windows, st.sampled_from([0.5, 1.0, 2.0]))
def test_the_next_request_counts_from_the_usage_of_the_compacted_one(
    messages: list[Any], window: int, ratio: float
) -> None:
    """Two prompts in a row; the provider reports usage for each request it gets."""

    def answer(request: Any) -> Any:
        usage = Usage(input_tokens=int(content(request.messages) * ratio), output_tokens=2)
        return faux.reply("ok", usage=usage)

    async def scenario() -> tuple[Agent, EventRecorder, FauxProvider]:
        provider = FauxProvider([answer, answer])  # a function step answers per request
        agent = Agent(
            model=Model(provider="faux", id="t", context_window=window),
            provider=provider,
            messages=messages,
            autoload=False,
        )
        recorder = EventRecorder()
        agent.subscribe(recorder)
        await agent.prompt("next")
        await agent.prompt("again")
        return agent, recorder, provider

    _agent, recorder, provider = asyncio.run(scenario())
    check_event_grammar(recorder.events)
    first, second = provider.requests
    starts = recorder.of_type("compaction_start")
    ends = recorder.of_type("compaction_end")
    runs = [e.run_id for e in recorder.of_type("agent_start")]
    if ends and ends[0].run_id == runs[0] and ends[0].error is None:
        # tokens_after: the estimate of what was kept, as it was sent
        assert ends[0].tokens_after == content(first.messages)
    # the second request is counted from the first reply's usage plus the new prompt
    reply = next(
        e.message for e in recorder.of_type("message_end") if e.message.role == "assistant"
    )
    expected = reply.usage.total_tokens + content([second.messages[-1]])
    threshold = window - min(16_384, window // 4)
    second_starts = [s for s in starts if s.run_id == runs[1]]
    assert bool(second_starts) == (expected > threshold)
    if second_starts:
        assert second_starts[0].tokens_before == expected
