"""transform_context: a chained, fail-soft projection of the transcript before each request.

Hook table (DESIGN §6): called before every model request; the transcript is untouched;
chained (each implementation gets the previous output, ``None`` = unchanged); an
implementation that raises, or whose output breaks the transcript invariants, is skipped
(its input passes on), a ``hook_error`` names it and the run goes on.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mainspring import (
    Agent,
    StopRun,
    ToolResultMessage,
    UserMessage,
    hookimpl,
    tool,
)
from mainspring.testing import faux, scripted_run

Steps = list[Any]


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


async def run_agent(plugins: list[Any], steps: Steps, **kwargs: Any) -> tuple[Agent, Any, Any]:
    """One prompt with the faux provider; returns (agent, recorder, provider)."""
    return await scripted_run(steps, "hello", plugins=plugins, **kwargs)


@contextmanager
def no_unawaited_coroutines() -> Iterator[None]:
    """Fail if a coroutine was created and dropped without being awaited."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    leaked = [w for w in caught if "never awaited" in str(w.message)]
    assert not leaked, [str(w.message) for w in leaked]


def texts(messages: tuple[Any, ...]) -> list[str]:
    return [m.content if isinstance(m.content, str) else m.text for m in messages]


def note(text: str) -> UserMessage:
    return UserMessage(content=text)


# -- chaining ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_projection_reaches_the_request_but_not_the_transcript(kind: str) -> None:
    if kind == "sync":

        class Inject:
            @hookimpl
            def transform_context(self, messages):
                return (note("injected"), *messages)

    else:

        class Inject:  # type: ignore[no-redef]
            @hookimpl
            async def transform_context(self, messages):
                return (note("injected"), *messages)

    agent, recorder, provider = await run_agent([Inject()], [faux.text("hi")])

    assert texts(provider.requests[0].messages) == ["injected", "hello"]
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    assert texts(agent.state.messages)[0] == "hello"
    assert recorder.of_type("hook_error") == []


async def test_implementations_chain_each_seeing_the_previous_output() -> None:
    seen: dict[str, list[str]] = {}

    class First:
        name = "first"

        @hookimpl
        def transform_context(self, messages):
            seen["first"] = texts(messages)
            return (*messages, note("from-first"))

    class Second:
        name = "second"

        @hookimpl
        async def transform_context(self, messages):
            seen["second"] = texts(messages)
            return [*messages, note("from-second")]  # any sequence is accepted

    # pluggy order: the most recently registered runs first.
    _, _, provider = await run_agent([Second(), First()], [faux.text("hi")])

    assert seen["first"] == ["hello"]
    assert seen["second"] == ["hello", "from-first"]
    assert texts(provider.requests[0].messages) == ["hello", "from-first", "from-second"]


async def test_none_means_unchanged_and_the_chain_goes_on() -> None:
    seen: list[tuple[str, list[str]]] = []

    class Pass:
        @hookimpl
        def transform_context(self, messages):
            seen.append(("pass", texts(messages)))
            return None

    class Add:
        @hookimpl
        async def transform_context(self, messages):
            seen.append(("add", texts(messages)))
            return (*messages, note("added"))

    _, _, provider = await run_agent([Add(), Pass()], [faux.text("hi")])

    assert seen == [("pass", ["hello"]), ("add", ["hello"])]
    assert texts(provider.requests[0].messages) == ["hello", "added"]


async def test_messages_are_passed_as_a_tuple_with_agent_and_signal() -> None:
    got: dict[str, Any] = {}

    class Spy:
        @hookimpl
        def transform_context(self, messages, agent, signal):
            got.update(messages=messages, agent=agent, signal=signal)

    agent, _, _ = await run_agent([Spy()], [faux.text("hi")])

    assert isinstance(got["messages"], tuple)
    # a plugin sees the agent through its own view
    assert got["agent"] is agent.view_for("Spy")
    assert got["signal"].aborted is False


async def test_called_before_every_model_request() -> None:
    calls: list[int] = []

    class Count:
        @hookimpl
        def transform_context(self, messages):
            calls.append(len(messages))

    _, _, provider = await run_agent(
        [Count()], [faux.tool_call("echo", {"text": "x"}), faux.text("done")], tools=[echo]
    )

    assert len(provider.requests) == 2
    assert calls == [1, 3]  # user; user + assistant + tool result


async def test_tryfirst_and_trylast_are_honoured() -> None:
    order: list[str] = []

    def plugin(label: str, **marks: bool) -> Any:
        class P:
            name = label

            @hookimpl(**marks)
            async def transform_context(self, messages):
                order.append(label)

        return P()

    plugins = [
        plugin("last", trylast=True),
        plugin("first", tryfirst=True),
        plugin("plain-a"),
        plugin("plain-b"),
    ]
    await run_agent(plugins, [faux.text("hi")])

    assert order == ["first", "plain-b", "plain-a", "last"]


# -- failure: fail soft -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_raising_implementation_is_skipped_and_reported(kind: str) -> None:
    seen_by_next: list[list[str]] = []

    if kind == "sync":

        class Broken:
            name = "broken-transform"

            @hookimpl
            def transform_context(self, messages):
                raise RuntimeError("transform exploded")

    else:

        class Broken:  # type: ignore[no-redef]
            name = "broken-transform"

            @hookimpl
            async def transform_context(self, messages):
                raise RuntimeError("transform exploded")

    class Next:
        @hookimpl
        def transform_context(self, messages):
            seen_by_next.append(texts(messages))

    with no_unawaited_coroutines():
        agent, recorder, provider = await run_agent([Next(), Broken()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert error.hook == "transform_context"
    assert error.plugin == "broken-transform"
    assert "RuntimeError" in error.error and "transform exploded" in error.error
    assert "skipped" in error.outcome
    # its input passed on unchanged, and the run went on
    assert seen_by_next == [["hello"]]
    assert texts(provider.requests[0].messages) == ["hello"]
    assert recorder.of_type("agent_end")[0].reason == "stop"
    assert agent.state.messages[-1].text == "hi"


async def test_the_hook_error_comes_before_the_request_inside_the_turn() -> None:
    class Broken:
        @hookimpl
        def transform_context(self):
            raise ValueError("nope")

    _, recorder, _ = await run_agent([Broken()], [faux.text("hi")])

    types = recorder.types()
    assert types.index("hook_error") < types.index("message_start", types.index("message_end"))
    (error,) = recorder.of_type("hook_error")
    assert error.plugin == "Broken"
    assert error.turn == 0


async def test_a_projection_that_drops_a_tool_result_is_skipped_and_blamed() -> None:
    class DropResults:
        name = "drop-results"

        @hookimpl
        def transform_context(self, messages):
            return tuple(m for m in messages if not isinstance(m, ToolResultMessage))

    _, recorder, provider = await run_agent(
        [DropResults()],
        [faux.tool_call("echo", {"text": "x"}), faux.text("done")],
        tools=[echo],
    )

    (error,) = recorder.of_type("hook_error")
    assert error.hook == "transform_context"
    assert error.plugin == "drop-results"
    assert "skipped" in error.outcome
    # the request still carried the tool result: the transcript stays valid to send
    second = provider.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool_result"]
    assert recorder.of_type("agent_end")[0].reason == "stop"


async def test_a_projection_with_an_orphan_tool_result_is_skipped() -> None:
    orphan = ToolResultMessage(tool_call_id="nobody", tool_name="echo", content=(), is_error=False)

    class Orphan:
        @hookimpl
        def transform_context(self, messages):
            return (*messages, orphan)

    _, recorder, provider = await run_agent([Orphan()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert error.plugin == "Orphan"
    assert "nobody" in error.error
    assert texts(provider.requests[0].messages) == ["hello"]


async def test_a_projection_with_a_non_message_is_skipped() -> None:
    class Junk:
        @hookimpl
        def transform_context(self, messages):
            return (*messages, "not a message")

    _, recorder, provider = await run_agent([Junk()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert error.plugin == "Junk"
    assert texts(provider.requests[0].messages) == ["hello"]


async def test_a_result_that_is_not_a_sequence_is_skipped() -> None:
    class Wrong:
        @hookimpl
        def transform_context(self, messages):
            return 42

    _, recorder, provider = await run_agent([Wrong()], [faux.text("hi")])

    (error,) = recorder.of_type("hook_error")
    assert error.plugin == "Wrong"
    assert texts(provider.requests[0].messages) == ["hello"]


# -- StopRun ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_stop_run_ends_the_run_before_the_request(kind: str) -> None:
    if kind == "sync":

        class Stopper:
            @hookimpl
            def transform_context(self, messages):
                raise StopRun("context policy says stop")

    else:

        class Stopper:  # type: ignore[no-redef]
            @hookimpl
            async def transform_context(self, messages):
                raise StopRun("context policy says stop")

    agent, recorder, provider = await run_agent([Stopper()], [faux.text("never sent")])

    end = recorder.of_type("agent_end")[0]
    assert end.reason == "stopped_by_hook"
    assert end.detail == "context policy says stop"
    assert provider.requests == []
    assert recorder.of_type("hook_error") == []
    # no assistant message is invented; the turn closes with message=None
    assert recorder.of_type("turn_end")[-1].message is None
    assert [m.role for m in agent.state.messages] == ["user"]
    assert agent.state.is_streaming is False
