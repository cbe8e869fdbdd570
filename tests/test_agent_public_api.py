"""The Agent's surface for embedders: outcomes, transcript edits, tools, session id.

- ``prompt()``/``resume()`` return the run's ``agent_end`` (messages, reason, detail,
  ``text``); ``is_running`` says whether a run is active.
- ``replace_messages``/``append_message`` work on an idle agent only, copy the list and
  keep the objects, and refuse a transcript that breaks the invariants.
- ``configure(tools=...)`` sets the complete tool list; owners follow.
- ``session_id`` reaches providers in every request.
- ``resume()`` after a custom message works when the converters make it sendable.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from mainspring import (
    Agent,
    AgentBusyError,
    AssistantMessage,
    ToolResultMessage,
    UserMessage,
    hookimpl,
    tool,
)
from mainspring.events import AgentEnd
from mainspring.testing import FauxProvider, faux, scripted_run


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


async def test_prompt_returns_the_runs_outcome() -> None:
    _, recorder, _ = await scripted_run([faux.text("hello there")])
    assert recorder.of_type(AgentEnd)[-1].text == "hello there"

    fresh = Agent(model="faux:test", provider=FauxProvider([faux.text("42")]), autoload=False)
    result = await fresh.prompt("what is it?")
    assert isinstance(result, AgentEnd)
    assert (result.reason, result.text) == ("stop", "42")
    assert [m.role for m in result.messages] == ["user", "assistant"]


async def test_resume_returns_the_outcome_and_is_running_tracks_the_run() -> None:
    seen: list[bool] = []
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([faux.error("down"), faux.text("back")]),
        autoload=False,
    )
    agent.subscribe(lambda event, signal: seen.append(agent.is_running))
    first = await agent.prompt("hi")
    assert first.reason == "error" and not agent.is_running

    second = await agent.resume()

    assert (second.reason, second.text) == ("stop", "back")
    assert all(seen) and not agent.is_running


async def test_replace_and_append_messages_on_an_idle_agent() -> None:
    agent = Agent(model="faux:test", provider=FauxProvider([faux.text("ok")]), autoload=False)
    history = [UserMessage(content="a"), AssistantMessage(content=())]
    agent.replace_messages(history)
    history.append(UserMessage(content="not taken"))
    assert len(agent.state.messages) == 2
    assert agent.state.messages[0] is history[0]

    agent.append_message(UserMessage(content="b"))
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "user"]

    orphan = ToolResultMessage(tool_call_id="nope", tool_name="x", content=())
    with pytest.raises(ValueError, match="valid transcript"):
        agent.replace_messages([UserMessage(content="a"), orphan])
    with pytest.raises(ValueError, match="breaks the transcript"):
        agent.append_message(orphan)
    assert len(agent.state.messages) == 3


async def test_editing_the_transcript_while_running_is_refused() -> None:
    refused: list[str] = []

    def edit(event: Any, signal: Any) -> None:
        if event.type == "turn_start":
            for action in (
                lambda: agent.replace_messages([]),
                lambda: agent.append_message(UserMessage(content="x")),
            ):
                try:
                    action()
                except AgentBusyError as error:
                    refused.append(str(error))

    agent = Agent(model="faux:test", provider=FauxProvider([faux.text("ok")]), autoload=False)
    agent.subscribe(edit)
    await agent.prompt("go")

    assert len(refused) == 2


async def test_configure_tools_sets_the_complete_list_and_owners_follow() -> None:
    @tool
    def extra(text: str) -> str:
        """Another tool."""
        return text

    class Bundle:
        name = "bundle"

        @hookimpl
        def register_tools(self) -> list[Any]:
            return [echo]

    agent = Agent(model="faux:test", provider=FauxProvider([]), autoload=False, plugins=[Bundle()])
    assert agent.tool_owners == {"echo": "bundle"}

    agent.configure(tools=[*agent.state.tools, extra])
    assert agent.tool_owners == {"echo": "bundle", "extra": "tools="}

    agent.configure(tools=[extra])
    assert agent.tool_owners == {"extra": "tools="}
    with pytest.raises(ValueError, match="two tools are named"):
        agent.configure(tools=[extra, extra])
    with pytest.raises(TypeError):
        agent.configure(tools=["not a tool"])


async def test_the_session_id_reaches_the_provider_in_every_request() -> None:
    provider = FauxProvider([faux.tool_call("echo", {"text": "x"}), faux.text("done")])
    agent = Agent(
        model="faux:test", provider=provider, autoload=False, tools=[echo], session_id="conv-7"
    )
    await agent.prompt("go")

    assert [request.session_id for request in provider.requests] == ["conv-7", "conv-7"]
    assert len(Agent(model="faux:test", provider=FauxProvider([])).session_id) == 32


class Note(BaseModel):
    role: str = "note"
    text: str


class NotesToUser:
    name = "notes"

    @hookimpl
    def convert_to_llm(self, messages: tuple[Any, ...]) -> list[Any]:
        return [UserMessage(content=m.text) if isinstance(m, Note) else m for m in messages]


async def test_resume_after_a_custom_message_the_converters_make_sendable() -> None:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([faux.text("seen the note")]),
        autoload=False,
        plugins=[NotesToUser()],
        messages=[Note(text="remember the milk")],
    )

    outcome = await agent.resume()

    assert outcome.text == "seen the note"


async def test_resume_after_a_custom_message_that_stays_unsendable_is_refused() -> None:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider([faux.text("never")]),
        autoload=False,
        messages=[UserMessage(content="hi"), AssistantMessage(content=()), Note(text="x")],
    )

    with pytest.raises(ValueError, match="nothing to resume after a 'note' message"):
        await agent.resume()
    assert not agent.is_running


async def test_new_tools_reach_an_active_run_at_its_next_turn() -> None:
    @tool
    def later(text: str) -> str:
        """Added while the run goes on."""
        return text.upper()

    provider = FauxProvider(
        [
            faux.tool_call("echo", {"text": "a"}),
            faux.tool_call("later", {"text": "b"}),
            faux.text("done"),
        ]
    )
    agent = Agent(model="faux:test", provider=provider, autoload=False, tools=[echo])

    def add_tool(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_end" and event.tool_name == "echo":
            agent.configure(tools=[*agent.state.tools, later])

    agent.subscribe(add_tool)
    outcome = await agent.prompt("go")

    results = [m for m in outcome.messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_name, r.is_error) for r in results] == [("echo", False), ("later", False)]
    assert [t.name for t in provider.requests[1].tools] == ["echo", "later"]
