"""Questions a running tool puts to the person, answered through the approvers.

A tool may need something only the person can give: a value to fill in (a form) or their
consent to visit a URL (to sign in, to pay). An MCP server's elicitation is such a
question. The tool asks with ``await ctx.ask(question)``
(:meth:`~mainspring.ToolContext.ask`); the kernel puts it to the same approvers as a
call a gate asked about (the ``request_approval`` hook, and ``agent.approve()`` when
``settings.approvals.api`` is on), as an :class:`~mainspring.ApprovalRequest` whose
``question`` is set, announced by a ``tool_approval_request`` event whose ``question``
is :meth:`Question.describe`. The model is never asked.

Everything fails closed. A question is *accepted* only when an approver allows it and
gives ``content`` (:class:`~mainspring.Approval`): for a form, the values entered, which
must fit the form's schema (:func:`answer_problems`); for a URL, ``{}`` (the person's
consent). An approver that allows without content (one written for tool calls, such as
an allow-all policy), an answer that does not fit, no approver, a timeout
(``settings.approvals.timeout_s``) and an abort all *decline*.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .json_schema import check_schema, schema_problems

__all__ = ["FIELD_TYPES", "Answer", "Question", "answer_problems", "form_problems"]

FIELD_TYPES = ("string", "number", "integer", "boolean", "array")
"""The types a form's field may have: flat values (``array``: a list of strings to choose
from, a multiple choice)."""

_MAX_FIELDS = 100


@dataclass(frozen=True, slots=True)
class Question:
    """One question for the person.

    ``asker`` says who asks (``MCP server "files"``), ``message`` what and why (shown to
    the person as written, made visible by whoever shows it). ``mode`` is ``"form"``
    (``schema``: a flat JSON-Schema object of :data:`FIELD_TYPES` fields, see
    :func:`form_problems`) or ``"url"`` (``url``: where the person is asked to go; it is
    never opened for them).
    """

    asker: str
    message: str
    mode: Literal["form", "url"] = "form"
    schema: Mapping[str, Any] | None = field(default=None, hash=False)
    url: str | None = None

    def __post_init__(self) -> None:
        if self.mode == "form":
            problems = form_problems(self.schema)
            if problems:
                raise ValueError(f"the question's form cannot be used: {problems[0]}")
        elif self.mode == "url":
            if not isinstance(self.url, str) or not self.url:
                raise ValueError("a URL question needs the url")
        else:
            raise ValueError(f'a question\'s mode is "form" or "url", not {self.mode!r}')

    def describe(self) -> dict[str, Any]:
        """The question as JSON: ``asker``, ``message``, ``mode`` and ``schema`` or ``url``."""
        described: dict[str, Any] = {"asker": self.asker, "message": self.message}
        described["mode"] = self.mode
        if self.mode == "form":
            described["schema"] = dict(self.schema or {})
        else:
            described["url"] = self.url
        return described


@dataclass(frozen=True, slots=True)
class Answer:
    """What came of a :class:`Question`.

    ``accepted``: the person answered (``content``: the form's values, or ``{}`` for a
    URL); otherwise it was declined, ``reason`` says why. ``decided_by`` is as in a
    ``tool_decision`` event (``approver``, ``api``, ``timeout``, ``no_approver``), or
    ``aborted``; ``plugin`` the approver that answered.
    """

    accepted: bool
    content: Mapping[str, Any] | None = None
    reason: str | None = None
    decided_by: str = "approver"
    plugin: str | None = None


def form_problems(schema: Any) -> list[str]:
    """Why ``schema`` cannot be a form (``[]`` if it can): a JSON-Schema object whose
    ``properties`` (at most 100) are each of a type in :data:`FIELD_TYPES`, no deeper
    (an ``array`` only of strings or enumerated strings)."""
    if not isinstance(schema, Mapping):
        return [f"a form's schema is a JSON object, not {type(schema).__name__}"]
    if schema.get("type") != "object":
        return ['a form\'s schema has "type": "object"']
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        return ["a form's properties are an object"]
    if len(properties) > _MAX_FIELDS:
        return [f"a form has at most {_MAX_FIELDS} fields, this one {len(properties)}"]
    for name, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if kind not in FIELD_TYPES:
            return [f"field {name!r}: a field's type is one of {', '.join(FIELD_TYPES)}"]
        if kind == "array":
            items = spec.get("items")
            if not isinstance(items, Mapping) or (
                items.get("type") != "string" and "enum" not in items and "anyOf" not in items
            ):
                return [f"field {name!r}: a multiple choice is an array of strings"]
    try:
        check_schema(dict(schema), linear_regex=True)
    except ValueError as error:
        return [str(error)]
    return []


def answer_problems(question: Question, content: Any) -> list[str]:
    """Why ``content`` does not answer ``question`` (``[]`` when it does).

    A form's content is an object of the form's fields only (flat values), valid against
    its schema (patterns matched in linear time); a URL's content is ``{}``.
    """
    if not isinstance(content, Mapping):
        return [f"an answer is an object of values, not {type(content).__name__}"]
    if question.mode == "url":
        return [] if not content else ["a URL question is answered with {} (consent)"]
    schema = question.schema or {}
    known = schema.get("properties", {})
    unknown = [str(name) for name in content if name not in known]
    if unknown:
        return [f"{', '.join(unknown)}: not a field of the form"]
    for name, value in content.items():
        flat = isinstance(value, str | int | float | bool) or (
            isinstance(value, list) and all(isinstance(item, str) for item in value)
        )
        if not flat:
            return [f"{name}: a field's value is a string, number, boolean or list of strings"]
    return schema_problems(dict(schema), dict(content), linear_regex=True)
