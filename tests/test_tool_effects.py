"""Tool effects and argument roles: declared once (``Tool(...)`` keywords, ``@tool`` with
``Annotated[..., Role(...)]``), checked against the vocabulary, ``unknown`` when undeclared,
and derived from MCP annotations."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from mainspring import Agent, PluginLoadError, Tool, hookimpl, tool
from mainspring.effects import UNKNOWN, Role, effects_from_hints


def _echo(args: Any, ctx: Any) -> str:
    return "ok"


SCHEMA = {
    "type": "object",
    "properties": {"source": {"type": "string"}, "destination": {"type": "string"}},
}


def test_a_tool_declares_effects_and_roles_as_keywords() -> None:
    move = Tool(
        "move_file",
        "Move a file.",
        SCHEMA,
        _echo,
        effects=("read", "write"),
        roles={"source": "path", "destination": "path"},
    )

    assert move.effects == frozenset({"read", "write"})
    assert dict(move.roles) == {"source": "path", "destination": "path"}


def test_a_tool_that_declares_nothing_is_unknown() -> None:
    bare = Tool("bare", "A tool.", SCHEMA, _echo)

    assert bare.effects == frozenset({UNKNOWN})
    assert dict(bare.roles) == {}


def test_tool_decorator_reads_roles_from_annotated_parameters() -> None:
    @tool(effects="send")
    def send_mail(
        to: Annotated[str, Role("principal")], body: Annotated[str, Role("content")], cc: str = ""
    ) -> str:
        """Send a mail."""
        return "sent"

    assert send_mail.effects == frozenset({"send"})
    assert dict(send_mail.roles) == {"to": "principal", "body": "content"}
    assert send_mail.spec.parameters["required"] == ["to", "body"]


@pytest.mark.parametrize(
    ("effects", "roles", "word"),
    [(("reed",), None, "'reed'"), (("read",), {"source": "pth"}, "'pth'")],
)
def test_an_unknown_word_is_an_error_naming_the_tool_and_the_word(
    effects: Any, roles: Any, word: str
) -> None:
    with pytest.raises(ValueError, match="move_file") as raised:
        Tool("move_file", "Move.", SCHEMA, _echo, effects=effects, roles=roles)
    assert word in str(raised.value)


def test_an_unknown_role_in_annotated_is_a_type_error_naming_function_and_word() -> None:
    with pytest.raises(TypeError, match=r"fetch.*'website'"):

        @tool
        def fetch(address: Annotated[str, Role("website")]) -> str:
            """Fetch."""
            return ""


def test_an_unknown_word_stops_the_agent_from_starting() -> None:
    class Bundle:
        name = "bad-bundle"

        @hookimpl
        def register_tools(self, agent: Any) -> list[Tool]:
            return [Tool("leak", "Leak.", SCHEMA, _echo, effects=("exfiltrate",))]

    with pytest.raises(PluginLoadError, match="exfiltrate"):
        Agent(model="faux:test", plugins=[Bundle()])


@pytest.mark.parametrize(
    ("hints", "expected"),
    [
        ({}, {UNKNOWN}),
        ({"read_only": True}, {"read"}),
        ({"read_only": True, "open_world": True}, {"read", "egress"}),
        ({"read_only": False, "destructive": True}, {"write"}),
        ({"destructive": False, "open_world": True}, {"write", "egress"}),
    ],
)
def test_mcp_annotations_map_onto_effects(hints: dict[str, bool], expected: set[str]) -> None:
    assert effects_from_hints(**hints) == frozenset(expected)


def test_an_mcp_servers_annotations_give_effects_and_idempotence() -> None:
    from mainspring.effects import from_mcp_annotations

    assert from_mcp_annotations({"readOnlyHint": True, "idempotentHint": True}) == (
        frozenset({"read"}),
        True,
    )
    assert from_mcp_annotations({"readOnlyHint": False, "openWorldHint": True}) == (
        frozenset({"write", "egress"}),
        False,
    )
    # a read-only tool may be called again: it is idempotent without saying so
    assert from_mcp_annotations({"readOnlyHint": True}) == (frozenset({"read"}), True)
    # garbage from a hostile server counts as no hint at all
    assert from_mcp_annotations({"readOnlyHint": "yes", "idempotentHint": 1}) == (
        frozenset({UNKNOWN}),
        False,
    )
    assert from_mcp_annotations(None) == (frozenset({UNKNOWN}), False)


def test_a_role_for_an_argument_the_tool_does_not_have_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"move_file.*does not have: src"):
        Tool("move_file", "Move.", SCHEMA, _echo, effects="write", roles={"src": "path"})
