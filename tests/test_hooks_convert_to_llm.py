"""convert_to_llm: chained, fail-soft mapping of custom messages to LLM messages.

Hook table (DESIGN §6): after ``transform_context``; chained; a built-in ``trylast``
default drops non-LLM roles (and failed assistant messages); an implementation that
raises or breaks the invariants is skipped with a ``hook_error`` naming it.
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
    CompactionSummary,
    StopRun,
    TextContent,
    ToolResultMessage,
    UserMessage,
    hookimpl,
    tool,
)
from mainspring.testing import EventRecorder, FauxProvider, faux, scripted_run


class Note(BaseModel):
    """A custom transcript entry: lives in the transcript, not sent as is."""

    model_config = ConfigDict(frozen=True)
    role: Literal["note"] = "note"
    text: str
    timestamp: float = Field(default_factory=time.time)


class Bookmark(BaseModel):
    """Another plugin's custom entry."""

    model_config = ConfigDict(frozen=True)
    role: Literal["bookmark"] = "bookmark"
    label: str
    timestamp: float = Field(default_factory=time.time)


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


async def run_agent(
    plugins: list[Any], steps: list[Any], prompt: Any = "hello", **kwargs: Any
) -> tuple[Agent, EventRecorder, FauxProvider]:
    return await scripted_run(steps, prompt, plugins=plugins, **kwargs)


@contextmanager
def no_unawaited_coroutines() -> Iterator[None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    leaked = [w for w in caught if "never awaited" in str(w.message)]
    assert not leaked, [str(w.message) for w in leaked]


def render_notes(messages: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        UserMessage(content=f"[note] {m.text}") if isinstance(m, Note) else m for m in messages
    )


def contents(messages: tuple[Any, ...]) -> list[Any]:
    out = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append(m.content)
        else:
            out.append(m.role)
    return out


# -- the built-in default ---------------------------------------------------------------


async def test_the_default_drops_custom_roles_from_the_request_only() -> None:
    history = [UserMessage(content="earlier"), Note(text="remember me")]
    agent, recorder, provider = await run_agent([], [faux.text("hi")], messages=history)

    assert contents(provider.requests[0].messages) == ["earlier", "hello"]
    # the custom message stays in the transcript
    assert [m.role for m in agent.state.messages] == ["user", "note", "user", "assistant"]
    assert recorder.of_type("hook_error") == []


async def test_the_default_drops_failed_assistant_messages() -> None:
    failed = AssistantMessage(
        content=(TextContent(text="partial"),),
        provider="faux",
        model="test",
        stop_reason="error",
        error_message="boom",
    )
    history = [UserMessage(content="earlier"), failed]
    _, _, provider = await run_agent([], [faux.text("hi")], messages=history)

    assert [m.role for m in provider.requests[0].messages] == ["user", "user"]


# -- chaining ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_plugin_renders_its_custom_message_before_the_default(kind: str) -> None:
    if kind == "sync":

        class Notes:
            @hookimpl
            def convert_to_llm(self, messages):
                return render_notes(messages)

    else:

        class Notes:  # type: ignore[no-redef]
            @hookimpl
            async def convert_to_llm(self, messages):
                return list(render_notes(messages))

    history = [UserMessage(content="earlier"), Note(text="remember me")]
    agent, recorder, provider = await run_agent([Notes()], [faux.text("hi")], messages=history)

    assert contents(provider.requests[0].messages) == ["earlier", "[note] remember me", "hello"]
    assert recorder.of_type("hook_error") == []
    assert isinstance(agent.state.messages[1], Note)  # the transcript is untouched


async def test_a_plugin_may_pass_other_plugins_custom_messages_through() -> None:
    """Only the chain's final output must be LLM-only: the default runs last and drops
    what no plugin converted, so a plugin that renders its own messages and passes the
    rest through (another plugin's, or the built-in compaction summary) is not broken."""

    class Notes:
        name = "notes"

        @hookimpl
        def convert_to_llm(self, messages):
            return render_notes(messages)

    history = [UserMessage(content="earlier"), Note(text="n1"), Bookmark(label="b1")]
    _, recorder, provider = await run_agent([Notes()], [faux.text("hi")], messages=history)

    assert recorder.of_type("hook_error") == []
    assert contents(provider.requests[0].messages) == ["earlier", "[note] n1", "hello"]


async def test_a_plugin_converter_works_after_a_compaction() -> None:
    """The built-in compaction summary has its own role until the default renders it;
    a plugin converter that returns the messages it got must not be rejected for it."""

    class Notes:
        name = "notes"

        @hookimpl
        def convert_to_llm(self, messages):
            return render_notes(messages)

    history = [CompactionSummary(summary="we talked", removed=4), Note(text="n")]
    _, recorder, provider = await run_agent([Notes()], [faux.text("hi")], messages=history)

    assert recorder.of_type("hook_error") == []
    sent = contents(provider.requests[0].messages)
    assert "[note] n" in sent
    assert any("we talked" in text for text in sent)


async def test_implementations_chain_and_transform_context_comes_first() -> None:
    order: list[tuple[str, list[Any]]] = []

    class Transform:
        @hookimpl
        def transform_context(self, messages):
            order.append(("transform", contents(messages)))
            return (*messages, Note(text="from transform"))

    class A:
        name = "a"

        @hookimpl
        def convert_to_llm(self, messages):
            order.append(("a", [m.role for m in messages]))
            return render_notes(messages)

    class B:
        name = "b"

        @hookimpl
        async def convert_to_llm(self, messages, agent):
            order.append(("b", [m.role for m in messages]))
            return None

    _, _, provider = await run_agent([B(), A(), Transform()], [faux.text("hi")])

    assert order == [
        ("transform", ["hello"]),
        ("a", ["user", "note"]),
        ("b", ["user", "user"]),
    ]
    assert contents(provider.requests[0].messages) == ["hello", "[note] from transform"]


async def test_tryfirst_and_plain_order_and_the_default_is_last() -> None:
    order: list[str] = []

    def plugin(label: str, **marks: bool) -> Any:
        class P:
            name = label

            @hookimpl(**marks)
            def convert_to_llm(self, messages):
                order.append(label)
                # everything here still sees the custom note: the default has not run
                assert any(isinstance(m, Note) for m in messages)

        return P()

    history = [UserMessage(content="earlier"), Note(text="n")]
    plugins = [plugin("mid-a"), plugin("early", tryfirst=True), plugin("mid-b")]
    _, recorder, provider = await run_agent(plugins, [faux.text("hi")], messages=history)

    assert order == ["early", "mid-b", "mid-a"]
    assert recorder.of_type("hook_error") == []
    assert contents(provider.requests[0].messages) == ["earlier", "hello"]


async def test_the_builtin_default_runs_after_a_plugins_trylast_converter() -> None:
    """The hookspec says the built-in ``trylast`` default "runs last"; a plugin that marks
    its own converter ``trylast`` (late, but still rendering its messages) must run
    before it, or its custom messages are already gone."""
    seen: list[list[str]] = []

    class Late:
        name = "late"

        @hookimpl(trylast=True)
        def convert_to_llm(self, messages):
            seen.append([m.role for m in messages])
            return render_notes(messages)

    history = [UserMessage(content="earlier"), Note(text="n")]
    _, recorder, provider = await run_agent([Late()], [faux.text("hi")], messages=history)

    assert seen == [["user", "note", "user"]]
    assert recorder.of_type("hook_error") == []
    assert contents(provider.requests[0].messages) == ["earlier", "[note] n", "hello"]


# -- failure: fail soft -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_raising_converter_is_skipped_and_reported(kind: str) -> None:
    if kind == "sync":

        class Broken:
            name = "broken-converter"

            @hookimpl
            def convert_to_llm(self, messages):
                raise KeyError("no renderer")

    else:

        class Broken:  # type: ignore[no-redef]
            name = "broken-converter"

            @hookimpl
            async def convert_to_llm(self, messages):
                raise KeyError("no renderer")

    history = [UserMessage(content="earlier"), Note(text="n")]
    with no_unawaited_coroutines():
        _, recorder, provider = await run_agent([Broken()], [faux.text("hi")], messages=history)

    (error,) = recorder.of_type("hook_error")
    assert error.hook == "convert_to_llm"
    assert error.plugin == "broken-converter"
    assert "KeyError" in error.error
    assert "skipped" in error.outcome
    # its input passed on: the default still produced a valid request
    assert contents(provider.requests[0].messages) == ["earlier", "hello"]
    assert recorder.of_type("agent_end")[0].reason == "stop"


async def test_a_converter_that_drops_a_tool_result_is_skipped_and_blamed() -> None:
    class DropResults:
        name = "drop-results"

        @hookimpl
        def convert_to_llm(self, messages):
            return tuple(m for m in messages if not isinstance(m, ToolResultMessage))

    _, recorder, provider = await run_agent(
        [DropResults()],
        [faux.tool_call("echo", {"text": "x"}), faux.text("done")],
        tools=[echo],
    )

    (error,) = recorder.of_type("hook_error")
    assert error.hook == "convert_to_llm"
    assert error.plugin == "drop-results"
    assert [m.role for m in provider.requests[1].messages] == ["user", "assistant", "tool_result"]


async def test_a_converter_returning_a_non_sequence_is_skipped() -> None:
    class Wrong:
        @hookimpl
        def convert_to_llm(self, messages):
            return "text"

    _, recorder, provider = await run_agent([Wrong()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert error.plugin == "Wrong"
    assert contents(provider.requests[0].messages) == ["hello"]


async def test_stop_run_from_convert_to_llm_is_a_deliberate_stop() -> None:
    class Stopper:
        @hookimpl
        async def convert_to_llm(self, messages):
            raise StopRun("nothing to send")

    agent, recorder, provider = await run_agent([Stopper()], [faux.text("never")])

    end = recorder.of_type("agent_end")[0]
    assert (end.reason, end.detail) == ("stopped_by_hook", "nothing to send")
    assert provider.requests == []
    assert recorder.of_type("hook_error") == []
    assert agent.state.error_message is None


class PassThrough:
    """A context transform that hands back the very tuple it got."""

    @hookimpl
    def transform_context(self, messages: tuple[Any, ...]) -> tuple[Any, ...]:
        return messages


@pytest.mark.parametrize("plugins", [[], [PassThrough()]])
async def test_a_failed_reply_of_an_earlier_run_is_never_sent(plugins: list[Any]) -> None:
    provider = FauxProvider(
        [faux.error("down", after=["partial words"]), faux.text("fine"), faux.text("again")]
    )
    agent = Agent(model="faux:test", provider=provider, plugins=plugins, autoload=False)
    await agent.prompt("first")
    assert agent.last_message.stop_reason == "error"
    await agent.prompt("second")
    await agent.prompt("third")
    sent = [[m.role for m in request.messages] for request in provider.requests]
    assert sent == [
        ["user"],
        ["user", "user"],  # the failed reply is in the transcript, not in the request
        ["user", "user", "assistant", "user"],
    ]
    assert len(agent.state.messages) == 6
