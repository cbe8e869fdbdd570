"""Compaction over transcripts whose replies carry usage, as real providers report it.

A reply's usage counts the whole request it answered. The fallback compaction must size
the tail it keeps by the tail's own content (a kept reply's usage stands for the old,
longer context), and after a compaction the built-in estimate is the estimate of what was
kept, so the next request does not compact again until the context has grown back.
"""

from __future__ import annotations

import itertools
from typing import Any

from mainspring import (
    Agent,
    AssistantMessage,
    CompactionSummary,
    Model,
    TextContent,
    Usage,
    UserMessage,
    tool,
)
from mainspring.estimate import estimate_tokens
from mainspring.invariants import transcript_problem
from mainspring.plugins.compaction import safe_cut_points
from mainspring.settings import CompactionSettings, Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

SYSTEM_TOKENS = 100
"""What a provider counts for the system prompt and tool specs, in every request."""


def growing_history(exchanges: int = 40) -> list[Any]:
    """``2 * exchanges`` messages of 100 estimated tokens each; every reply reports the
    usage of its request (everything before it plus the system prompt) and its output."""
    history: list[Any] = []
    sent = SYSTEM_TOKENS
    for _ in range(exchanges):
        history.append(UserMessage(content="q" * 384))  # 384 + 16 framing = 100 tokens
        sent += 100
        history.append(
            AssistantMessage(
                content=(TextContent(text="a" * 384),),
                provider="faux",
                model="t",
                stop_reason="stop",
                usage=Usage(input_tokens=sent, output_tokens=100),
            )
        )
        sent += 100
    return history


def content(messages: Any) -> int:
    return estimate_tokens(list(messages), reported_usage=False)


async def test_the_kept_tail_is_the_longest_within_keep_recent_tokens() -> None:
    history = growing_history()
    assert estimate_tokens(history) == 8_100  # the newest usage: 7,900 in, 100 out
    # window 8,000: threshold 6,000, half the usable window 3,000 > keep_recent_tokens
    settings = Settings(compaction=CompactionSettings(keep_recent_tokens=2_000))
    provider = FauxProvider([faux.text("done")])
    agent = Agent(
        model=Model(provider="faux", id="t", context_window=8_000),
        provider=provider,
        messages=history,
        settings=settings,
        autoload=False,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("next")
    check_event_grammar(recorder.events)

    [end] = recorder.of_type("compaction_end")
    assert end.error is None
    marker, *kept, reply = agent.state.messages
    assert isinstance(marker, CompactionSummary)
    assert reply.stop_reason == "stop"
    body = [*history, kept[-1]]  # what was compacted: the history and the prompt
    assert kept == body[len(body) - len(kept) :]
    # within the budget, and no safe cut point keeps more that also fits
    assert content(kept) <= 2_000
    start = len(body) - len(kept)
    longer = [point for point in safe_cut_points(body) if point < start]
    assert longer and content(body[longer[-1] :]) > 2_000
    assert len(kept) == 20  # 19 messages of history and the prompt (was 1: the prompt)
    # the request carried the summary and the whole kept tail
    [request] = provider.requests
    assert len(request.messages) == 1 + len(kept)
    assert transcript_problem(agent.state.messages) is None


async def test_tokens_after_are_the_estimate_of_what_was_kept() -> None:
    history = growing_history()
    recorder = EventRecorder()
    agent = Agent(
        model=Model(provider="faux", id="t", context_window=2_000),
        provider=FauxProvider([faux.text("done")]),
        messages=history,
        autoload=False,
    )
    agent.subscribe(recorder)
    await agent.prompt("next")
    [end] = recorder.of_type("compaction_end")
    assert end.error is None
    assert end.tokens_before >= 8_100
    assert end.tokens_after < end.tokens_before
    assert end.tokens_after <= 1_500  # the threshold of a 2,000-token window
    # what the request carried, by content (the kept replies' usage no longer counts)
    [request] = agent.provider.requests  # type: ignore[attr-defined]
    assert end.tokens_after == content(request.messages)
    assert len(request.messages) > 2  # the summary, kept history and the prompt


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


async def test_no_second_compaction_until_the_context_grows_again() -> None:
    """Built-in fallback alone, usage reported by the provider for every request.

    A 2,000-token window compacts above 1,500 tokens and keeps at most 750. The history
    starts below the threshold and each tool turn adds about 110 tokens, so the first
    compaction comes mid-loop, where the newest reply (a tool call, with usage) is kept;
    after it several turns fit before the next.
    """
    turns = 12
    provider = FauxProvider(
        [faux.tool_call("echo", {"text": "x" * 200}) for _ in range(turns)] + [faux.text("done")]
    )
    agent = Agent(
        model=Model(provider="faux", id="t", context_window=2_000),
        provider=provider,
        messages=growing_history(6),
        tools=[echo],
        autoload=False,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("next")
    check_event_grammar(recorder.events)

    ends = recorder.of_type("compaction_end")
    assert ends and all(end.error is None for end in ends)
    for end in ends:
        assert end.tokens_after < end.tokens_before
        assert end.tokens_after <= 1_500
    assert len(provider.requests) == turns + 1
    # every compaction is followed by requests that fit: a compaction per request was the
    # failure (the kept replies' usage still counted the whole old context)
    assert len(ends) <= 2
    requests_at = [
        sum(1 for e in recorder.events[: recorder.events.index(end)] if e.type == "turn_start")
        for end in ends
    ]
    assert all(later - earlier >= 4 for earlier, later in itertools.pairwise(requests_at))
    assert transcript_problem(agent.state.messages) is None
    assert agent.state.messages[-1].stop_reason == "stop"


def _compacted(request: Any) -> bool:
    first = request.messages[0] if request.messages else None
    return isinstance(first, UserMessage) and str(first.content).startswith("[The earlier")


async def test_a_later_prompt_does_not_compact_again_when_no_reply_reported_usage() -> None:
    """After a compaction the estimate must not lean on the kept replies' old usage.

    The compaction comes mid tool loop, so it keeps the newest tool call and its result;
    that call reported the usage of the whole pre-compaction request. The reply to the
    compacted request fails (an error reply reports no usage). The next prompt sends
    little more than the compacted context: it must not compact again.
    """

    def step(request: Any) -> Any:
        if request.messages[-1].role == "user" and request.messages[-1].content == "and now?":
            return faux.text("fine")
        if _compacted(request):
            return faux.error("upstream unavailable")
        return faux.tool_call("echo", {"text": "x" * 200})

    provider = FauxProvider([step] * 12)
    agent = Agent(
        model=Model(provider="faux", id="t", context_window=2_000),
        provider=provider,
        messages=growing_history(6),
        tools=[echo],
        autoload=False,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("next")
    [first] = recorder.of_type("compaction_end")
    assert first.error is None and first.tokens_after < first.tokens_before
    assert agent.state.messages[-1].stop_reason == "error"
    kept = [m for m in agent.state.messages if isinstance(m, AssistantMessage)]
    # a kept reply reported a request bigger than everything that is left
    assert max(m.usage.total_tokens for m in kept) > first.tokens_after

    recorder.clear()
    await agent.prompt("and now?")
    check_event_grammar(recorder.events)
    assert recorder.of_type("compaction_start") == []
    assert agent.state.messages[-1].stop_reason == "stop"
