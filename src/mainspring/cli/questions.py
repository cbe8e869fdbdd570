"""The terminal answers a running tool's question (:mod:`mainspring.questions`).

The terminal approver (:mod:`mainspring.cli.approve`) hands a request whose ``question``
is set to :func:`answer`. It shows who asks and the message, nothing hidden
(:func:`~mainspring.cli.approve.visible`), then:

- a URL question shows the URL (it is never opened) and reads ``y`` (the person will go
  there: accepted) or ``n``;
- a form reads ``y`` or ``n``, then each field in turn, saying its type, whether it is
  required, its choices and description: an empty line leaves an optional field out; a
  value that does not fit is said and asked again; what was entered is checked against
  the whole form before it is sent.

End of input, ``n``, or an answer that does not fit the form declines. ``--yes`` and
``--no`` answer tool calls, not questions: with them (and without a terminal) a question
is declined, and stderr says so.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..contract.decisions import Approval
from ..questions import Question, answer_problems

__all__ = ["answer"]

Say = Callable[[str], None]
ReadLine = Callable[[], Awaitable[str]]
Show = Callable[[str], str]

_NO_VALUE = object()


async def answer(
    question: Question, mode: str, say: Say, read_line: ReadLine, show: Show
) -> Approval:
    """The person's answer to ``question`` (``show`` makes text visible; see the module)."""
    say(f"\nquestion from {show(question.asker)}:\n  {show(question.message)}\n")
    if mode != "ask":
        say("  declined: --yes and --no answer tool calls, not questions (or no terminal)\n")
        return Approval(False, reason="declined: nobody at the terminal to answer")
    if question.mode == "url":
        say(f"  it asks you to open (not opened for you): {show(question.url or '')}\n")
        if await _yes(say, read_line, "  will you? [y]es / [n]o: "):
            return Approval(True, reason="the person agreed at the terminal", content={})
        return Approval(False, reason="declined at the terminal")
    if not await _yes(say, read_line, "  answer it? [y]es / [n]o: "):
        return Approval(False, reason="declined at the terminal")
    schema = question.schema or {}
    required = set(schema.get("required", ()))
    content: dict[str, Any] = {}
    for name, field in dict(schema.get("properties", {})).items():
        value = await _field(str(name), field, name in required, say, read_line, show)
        if value is None:
            return Approval(False, reason="declined at the terminal (end of input)")
        if value is not _NO_VALUE:
            content[str(name)] = value
    problems = answer_problems(question, content)
    if problems:
        say(f"  declined: the answer does not fit: {show('; '.join(problems))}\n")
        return Approval(False, reason="the answer entered does not fit the form")
    return Approval(True, reason="answered at the terminal", content=content)


async def _yes(say: Say, read_line: ReadLine, prompt: str) -> bool:
    while True:
        say(prompt)
        line = await read_line()
        word = line.strip().lower()
        if word in ("y", "yes"):
            return True
        if word in ("n", "no", "") or not line:
            return False
        say("please answer y or n\n")


async def _field(
    name: str, field: Mapping[str, Any], required: bool, say: Say, read_line: ReadLine, show: Show
) -> Any:
    """One field's value, ``_NO_VALUE`` for an optional field left empty, ``None`` at the
    end of input."""
    kind = str(field.get("type"))
    choices = _choices(field)
    facts = [kind, "required" if required else "optional, Enter to leave out"]
    if choices:
        facts.append("one of " + ", ".join(show(c) for c in choices))
    if kind == "array":
        facts.append("comma-separated")
    about = field.get("description") or field.get("title")
    heading = f"  {show(name)} ({'; '.join(facts)})"
    if isinstance(about, str) and about:
        heading += f": {show(about)}"
    while True:
        say(heading + "\n  > ")
        line = await read_line()
        if not line:
            return None
        text = line.rstrip("\r\n")
        if not text:
            if not required:
                return _NO_VALUE
            say("  this field is required\n")
            continue
        try:
            return _convert(kind, text, choices)
        except ValueError as error:
            say(f"  {error}\n")


def _choices(field: Mapping[str, Any]) -> list[str]:
    source = field.get("items", field) if field.get("type") == "array" else field
    if not isinstance(source, Mapping):
        return []
    if isinstance(source.get("enum"), list):
        return [str(choice) for choice in source["enum"]]
    options = source.get("oneOf") or source.get("anyOf") or ()
    return [str(o["const"]) for o in options if isinstance(o, Mapping) and "const" in o]


def _convert(kind: str, text: str, choices: list[str]) -> Any:
    if kind == "boolean":
        word = text.strip().lower()
        if word in ("y", "yes", "true"):
            return True
        if word in ("n", "no", "false"):
            return False
        raise ValueError("please answer y or n")
    if kind in ("integer", "number"):
        try:
            number = json.loads(text.strip())
        except ValueError:
            number = None
        if isinstance(number, bool) or not isinstance(number, int | float):
            wanted = "a whole number" if kind == "integer" else "a number"
            raise ValueError(f"please enter {wanted}")
        if kind == "integer" and not (isinstance(number, int) or number.is_integer()):
            raise ValueError("please enter a whole number")
        return int(number) if kind == "integer" else number
    if kind == "array":
        values = [part.strip() for part in text.split(",") if part.strip()]
        wrong = [value for value in values if choices and value not in choices]
        if wrong:
            raise ValueError(f"not among the choices: {', '.join(wrong)}")
        return values
    if choices and text not in choices:
        raise ValueError("please enter one of the choices")
    return text
