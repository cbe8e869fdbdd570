"""The terminal answers a running tool's question: a form field by field, a URL by
consent; anything else (n, end of input, --yes/--no, values that do not fit) declines."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable

import pytest

from mainspring import Approval, ApprovalRequest
from mainspring.cli.approve import TerminalApprover
from mainspring.questions import Question

FORM = Question(
    'MCP server "x"',
    "Who is asking?\x1b[2J",
    "form",
    schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Your name"},
            "age": {"type": "integer", "minimum": 0},
            "colour": {"type": "string", "enum": ["red", "green"]},
            "news": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        },
        "required": ["name", "age"],
    },
)
URL = Question('MCP server "x"', "Sign in", "url", url="https://example.com/login")


def lines(*typed: str) -> Callable[[], Awaitable[str]]:
    """What the person types, one line each; then end of input."""
    queue = [line + "\n" for line in typed]

    async def read_line() -> str:
        return queue.pop(0) if queue else ""

    return read_line


async def ask(question: Question, *typed: str, mode: str = "ask") -> tuple[Approval, str]:
    err = io.StringIO()
    approver = TerminalApprover(mode, err, lines(*typed))  # type: ignore[arg-type]
    request = ApprovalRequest("c1", "greet", question.describe(), question.message,
                              question.asker, question)  # fmt: skip
    answers = await approver.request_approval((request,))
    return answers["c1"], err.getvalue()


async def test_a_form_is_filled_field_by_field() -> None:
    # a value that does not fit its field is said and asked again; Enter skips an optional
    approval, shown = await ask(FORM, "y", "Ada", "old", "-1.5", "36", "blue", "red", "", "a,b")
    assert approval.allow
    assert approval.content == {"name": "Ada", "age": 36, "colour": "red", "tags": ["a", "b"]}
    assert "please enter a whole number" in shown and "please enter one of the choices" in shown
    assert "Who is asking?⟨U+001B⟩[2J" in shown and "\x1b" not in shown
    assert "name (string; required): Your name" in shown


async def test_values_that_break_the_form_decline() -> None:
    approval, shown = await ask(FORM, "y", "Ada", "-3", "", "", "")
    assert not approval.allow and "does not fit" in shown


@pytest.mark.parametrize("typed", [("n",), ("y", "Ada"), ()], ids=["no", "end-mid-form", "eof"])
async def test_no_or_the_end_of_input_declines(typed: tuple[str, ...]) -> None:
    approval, _ = await ask(FORM, *typed)
    assert not approval.allow and approval.content is None


async def test_a_url_is_shown_and_consent_given() -> None:
    approval, shown = await ask(URL, "y")
    assert approval.allow and approval.content == {}
    assert "https://example.com/login" in shown and "not opened" in shown
    approval, _ = await ask(URL, "n")
    assert not approval.allow


@pytest.mark.parametrize("mode", ["yes", "no"])
async def test_yes_and_no_do_not_answer_questions(mode: str) -> None:
    approval, shown = await ask(URL, "y", mode=mode)
    assert not approval.allow and "declined" in shown
