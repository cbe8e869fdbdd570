"""The built-in token estimate, computed at once or kept current message by message.

The kernel keeps the estimate of its transcript as messages arrive
(:class:`~mainspring.estimate.RunningEstimate`) and asks no one when only the
built-in estimate would answer; both ways must give what :func:`estimate_tokens` gives
for the same messages, and the compaction decision must see that number.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring import (
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    hookimpl,
)
from mainspring.estimate import IMAGE_TOKENS, RunningEstimate, estimate_tokens
from mainspring.messages import Usage
from mainspring.testing import faux, scripted_run

texts = st.text(max_size=40)
usages = st.one_of(
    st.just(Usage()),
    st.builds(Usage, input_tokens=st.integers(0, 500), output_tokens=st.integers(0, 500)),
)
blocks = st.one_of(
    st.builds(TextContent, text=texts),
    st.builds(ThinkingContent, thinking=texts),
    st.builds(
        ToolCall,
        id=st.text(min_size=1, max_size=5),
        name=st.sampled_from(["read", "write"]),
        arguments=st.dictionaries(st.text(max_size=5), st.integers() | texts, max_size=3),
    ),
)
messages = st.one_of(
    st.builds(UserMessage, content=texts),
    st.builds(
        AssistantMessage,
        content=st.lists(blocks, max_size=3).map(tuple),
        provider=st.just("faux"),
        model=st.just("m"),
        usage=usages,
        stop_reason=st.just("stop"),
    ),
    st.builds(
        ToolResultMessage,
        tool_call_id=st.just("c"),
        tool_name=st.just("read"),
        content=st.lists(
            st.builds(TextContent, text=texts)
            | st.just(ImageContent(data="aGk=", mime_type="image/png")),
            max_size=2,
        ).map(tuple),
        is_error=st.booleans(),
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, max_size=25))
def test_the_running_estimate_equals_the_estimate_of_every_prefix(history: list[Any]) -> None:
    running = RunningEstimate()
    assert running.tokens == estimate_tokens(()) == 0
    for index, message in enumerate(history):
        running.add(message)
        assert running.tokens == estimate_tokens(history[: index + 1])
    assert RunningEstimate(history).tokens == estimate_tokens(history)


def test_usage_stands_for_everything_up_to_the_newest_reporting_reply() -> None:
    early = UserMessage(content="x" * 4_000)
    reply = AssistantMessage(
        content=(TextContent(text="y" * 400),),
        provider="faux",
        model="m",
        usage=Usage(input_tokens=70, output_tokens=30),
        stop_reason="stop",
    )
    image = ToolResultMessage(
        tool_call_id="c",
        tool_name="shot",
        content=(ImageContent(data="aGk=", mime_type="image/png"),),
        is_error=False,
    )
    assert estimate_tokens([early, reply]) == 100
    assert estimate_tokens([early, reply, image]) == 100 + 16 // 4 + IMAGE_TOKENS


class Counted:
    """Records what ``count_tokens`` answered before it, by answering nothing."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    @hookimpl(trylast=True)
    def count_tokens(self, messages: tuple[Any, ...]) -> None:
        self.seen.append(messages)


WINDOW = 2_000
SMALL = Model(provider="faux", id="small", context_window=WINDOW)


def history_without_usage(count: int) -> list[Any]:
    out: list[Any] = []
    for index in range(count):
        out.append(UserMessage(content=f"question {index} " * 20))
        out.append(
            AssistantMessage(
                content=(TextContent(text=f"answer {index} " * 20),),
                provider="faux",
                model="small",
                stop_reason="stop",
            )
        )
    return out


async def test_compaction_sees_the_estimate_of_the_request_without_any_plugin() -> None:
    history = history_without_usage(30)
    run = await scripted_run([faux.text("done")], model=SMALL, messages=history)
    start = next(e for e in run.recorder.events if e.type == "compaction_start")
    prompt = next(
        e.message
        for e in run.recorder.events
        if e.type == "message_end" and e.message.role == "user"
    )
    # the request is the history plus the prompt
    assert start.tokens_before == estimate_tokens([*history, prompt])
    assert start.tokens_before > WINDOW - WINDOW // 4


async def test_a_plugin_that_counts_nothing_leaves_the_built_in_answer() -> None:
    history = history_without_usage(30)
    counter = Counted()
    run = await scripted_run(
        [faux.text("done")],
        model=SMALL,
        messages=history,
        plugins=[counter],
    )
    start = next(e for e in run.recorder.events if e.type == "compaction_start")
    assert counter.seen, "a plugin implementation is still asked"
    assert start.tokens_before == estimate_tokens(counter.seen[0])
