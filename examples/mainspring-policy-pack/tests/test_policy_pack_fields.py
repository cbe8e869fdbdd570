"""Redaction sees every field of a result's ``details`` and of a progress report: values are
walked the way they are serialised (dataclass fields, model dumps, containers), not the
way they print, and what cannot be walked is withheld."""

from __future__ import annotations

import json
from collections import namedtuple
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mainspring_policy_pack
import pytest

from mainspring import Agent, Settings, ToolContext, ToolResult, tool
from mainspring.events import event_to_json
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux

TOKEN = "ghp_" + "Z9y8X7w6" * 5
PLUGIN = "mainspring-policy-pack"


@dataclass(frozen=True)
class Credentials:
    user: str
    token: str = field(repr=False)  # hidden from repr, but serialised


Pair = namedtuple("Pair", ["name", "value"])


class Opaque:
    """Not plain data: nothing says how it would be serialised."""

    def __init__(self) -> None:
        self.token = TOKEN

    def __repr__(self) -> str:
        return "<Opaque>"


def _agent(tmp_path: Path, tools: list[Any], steps: list[Any]) -> tuple[Agent, EventRecorder]:
    agent = Agent(
        model="faux:test",
        provider=FauxProvider(steps),
        tools=tools,
        plugins=[mainspring_policy_pack],
        autoload=False,
        settings=Settings(
            session_path=str(tmp_path / "session.jsonl"),
            plugin_options={PLUGIN: {"workspace": str(tmp_path)}},
        ),
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    return agent, recorder


async def test_a_field_hidden_from_repr_never_reaches_the_session_file_or_the_events(
    tmp_path: Path,
) -> None:
    @tool(effects=("read",))
    def login(ctx: ToolContext) -> ToolResult:
        """Log in and report the credentials used."""
        ctx.update(Credentials("bot", TOKEN))
        return ToolResult("logged in", details={"credentials": Credentials("bot", TOKEN)})

    agent, recorder = _agent(tmp_path, [login], [faux.tool_call("login", {}), faux.text("ok")])

    await agent.prompt("go")

    check_event_grammar(recorder.events)
    session = (tmp_path / "session.jsonl").read_text()
    events = "\n".join(event_to_json(event) for event in recorder.events)
    assert TOKEN not in session and TOKEN not in events
    (update,) = recorder.of_type("tool_execution_update")
    assert update.partial_result == {"user": "bot", "token": "[REDACTED:github_token]"}
    (end,) = recorder.of_type("tool_execution_end")
    assert end.result.details == {
        "credentials": {"user": "bot", "token": "[REDACTED:github_token]"}
    }
    assert json.loads(session.splitlines()[-2])["message"]["details"] == end.result.details


@pytest.fixture
def policy_hook(tmp_path: Path) -> Any:
    agent, _ = _agent(tmp_path, [], [])

    def details(value: Any) -> Any:
        result = mainspring_policy_pack.after_tool_result(ToolResult("", details=value), agent)
        return value if result is None else result.details

    return details


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Pair("token", TOKEN), Pair("token", "[REDACTED:github_token]")),
        ({"tags": frozenset({TOKEN})}, {"tags": frozenset({"[REDACTED:github_token]"})}),
        ([f"api_key={TOKEN}".encode()], ["api_key=[REDACTED:github_token]"]),
        ((Credentials("a", TOKEN),), ({"user": "a", "token": "[REDACTED:github_token]"},)),
    ],
    ids=["named-tuple", "frozenset", "bytes", "dataclass-in-tuple"],
)
def test_every_container_is_walked(policy_hook: Any, value: Any, expected: Any) -> None:
    assert policy_hook(value) == expected


def test_what_cannot_be_walked_is_withheld_not_passed_on(policy_hook: Any) -> None:
    cyclic: dict[str, Any] = {"name": "loop"}
    cyclic["self"] = cyclic
    clean = {"user": Credentials("a", ""), "pair": Pair("n", 1), "raw": b"bytes"}

    opaque = policy_hook({"client": Opaque(), "n": 3})
    looped = policy_hook(cyclic)

    assert policy_hook(clean) is clean  # plain data without a secret is passed on as is
    assert opaque["n"] == 3
    assert opaque["client"].startswith(f"<object of type {__name__}.Opaque withheld:")
    assert looped["self"].startswith("<object of type builtins.dict withheld: it contains")
