"""The vocabulary a policy pack reasons with: what a tool does, what its arguments are,
and what its results can be trusted with.

**Effects** say what running a tool does to the world: ``read`` (reads local state),
``write`` (changes local state: files, records, calendars), ``execute`` (runs code or
commands), ``egress`` (sends data to a network destination), ``send`` (delivers a message
or a payment to a principal: mail, chat, transfers) and ``none`` (a pure computation). A
tool that declares nothing has the effect ``unknown``, which a pack treats as it likes.

**Roles** say what an argument is: ``path`` (one file path), ``paths`` (a list of them),
``command`` (a shell command), ``url``, ``principal`` (a recipient, user or account) and
``content`` (a body that will be written or sent).

Declared on a tool with keywords (``Tool(..., effects=("read",), roles={"path": "path"})``)
or, for ``@tool`` functions, with ``typing.Annotated``
(``path: Annotated[str, Role("path")]``) and ``@tool(effects=...)``. A word outside the
vocabulary is a ``ValueError`` naming the tool and the word, so the agent does not start.

**Labels** (:class:`Labels`) travel with a tool's result (a tool whose output has parts
of different trust returns them from different tools: headers from one, bodies from
another): ``integrity`` (``trusted`` or ``untrusted``: may the content steer
the agent?), ``confidentiality`` (``public`` < ``internal`` < ``confidential`` <
``secret``) and ``sources`` (free strings: ``"mail:inbox"``). Several labels combine with
:meth:`Labels.join`: untrusted wins, the highest confidentiality wins, sources are united.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = [
    "CONFIDENTIALITY",
    "EFFECTS",
    "ROLES",
    "UNKNOWN",
    "UNTRUSTED",
    "Confidentiality",
    "Integrity",
    "Labels",
    "Role",
    "check_effects",
    "check_roles",
    "effects_from_hints",
    "from_mcp_annotations",
    "join_labels",
    "message_labels",
]

EFFECTS: frozenset[str] = frozenset({"read", "write", "execute", "egress", "send", "none"})
"""The effects a tool may declare."""

UNKNOWN = "unknown"
"""The effect of a tool that declared none."""

ROLES: frozenset[str] = frozenset({"path", "paths", "command", "url", "principal", "content"})
"""The roles an argument may declare."""

CONFIDENTIALITY: tuple[str, ...] = ("public", "internal", "confidential", "secret")
"""Confidentiality levels, lowest first."""

Integrity: TypeAlias = Literal["trusted", "untrusted"]
Confidentiality: TypeAlias = Literal["public", "internal", "confidential", "secret"]


def check_effects(tool: str, effects: Iterable[str] | str | None) -> frozenset[str]:
    """The declared ``effects`` of ``tool`` as a set; ``{"unknown"}`` when none is declared
    (or when ``"unknown"`` is declared alone, as a tool wrapping another's may).

    Raises ``ValueError`` naming the tool and the word for a word outside :data:`EFFECTS`.
    """
    if effects is None:
        return frozenset({UNKNOWN})
    words = [effects] if isinstance(effects, str) else list(effects)
    if words == [UNKNOWN] or set(words) == {UNKNOWN}:
        return frozenset({UNKNOWN})
    for word in words:
        if word not in EFFECTS:
            raise ValueError(
                f"tool {tool!r}: unknown effect {word!r} (known: {', '.join(sorted(EFFECTS))})"
            )
    return frozenset(words) if words else frozenset({UNKNOWN})


def check_roles(tool: str, roles: Mapping[str, str] | None) -> Mapping[str, str]:
    """``roles`` (argument name → role) checked against :data:`ROLES`.

    Raises ``ValueError`` naming the tool, the argument and the word for an unknown role.
    """
    if not roles:
        return {}
    checked: dict[str, str] = {}
    for argument, role in roles.items():
        if not isinstance(argument, str) or not argument:
            raise ValueError(f"tool {tool!r}: a role is declared for a non-string argument name")
        if role not in ROLES:
            raise ValueError(
                f"tool {tool!r}: argument {argument!r} has an unknown role {role!r} "
                f"(known: {', '.join(sorted(ROLES))})"
            )
        checked[argument] = role
    return checked


@dataclass(frozen=True, slots=True)
class Role:
    """``Annotated`` metadata giving a ``@tool`` parameter its role.

    ::

        @tool(effects=("send",))
        def send_mail(to: Annotated[str, Role("principal")], body: Annotated[str, Role("content")]):
            ...

    The word is checked when the tool is built (an unknown one is a ``TypeError`` naming
    the function and the word).
    """

    name: str


def effects_from_hints(
    *,
    read_only: bool | None = None,
    destructive: bool | None = None,
    open_world: bool | None = None,
) -> frozenset[str]:
    """The effects implied by MCP tool annotations (``readOnlyHint``, ``destructiveHint``,
    ``openWorldHint``; ``idempotentHint`` maps onto ``Tool.idempotent`` instead).

    Annotations are hints from a server, so they can only narrow what is known when they
    say something: ``readOnlyHint`` true gives ``read`` (plus ``egress`` when the tool
    reaches an open world, ``openWorldHint`` true); a tool that is not read-only is a
    ``write`` (plus ``egress`` for an open world, whatever ``destructiveHint`` says);
    no hint at all gives ``unknown``.
    """
    if read_only is None and destructive is None and open_world is None:
        return frozenset({UNKNOWN})
    found = {"read"} if read_only else {"write"}
    if open_world:
        found.add("egress")
    return frozenset(found)


def from_mcp_annotations(annotations: Mapping[str, Any] | None) -> tuple[frozenset[str], bool]:
    """``(effects, idempotent)`` for an MCP tool's ``annotations`` (the camelCase dict a
    server sends: ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
    ``openWorldHint``); see :func:`effects_from_hints`. A hint that is not a bool (a
    hostile or broken server) counts as absent; ``idempotent`` is true only when
    ``idempotentHint`` or ``readOnlyHint`` is ``True`` (a call that changes nothing may
    be sent again).
    """
    found = annotations if isinstance(annotations, Mapping) else {}

    def hint(key: str) -> bool | None:
        value = found.get(key)
        return value if isinstance(value, bool) else None

    effects = effects_from_hints(
        read_only=hint("readOnlyHint"),
        destructive=hint("destructiveHint"),
        open_world=hint("openWorldHint"),
    )
    return effects, hint("idempotentHint") is True or hint("readOnlyHint") is True


class Labels(BaseModel):
    """What a result (or one of its text blocks) may be trusted with.

    - ``integrity``: ``trusted`` (the content may steer the agent: the user's own data, a
      system the user controls) or ``untrusted`` (written by someone else: inbound mail,
      web pages, chat channels, files written by others).
    - ``confidentiality``: one of :data:`CONFIDENTIALITY`.
    - ``sources``: where the content came from, free strings (``"mail:inbox"``).

    Frozen; the default is trusted, public, of no named source.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    integrity: Integrity = "trusted"
    confidentiality: Confidentiality = "public"
    sources: tuple[str, ...] = ()

    @field_validator("sources", mode="before")
    @classmethod
    def _one_source(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (value,)
        return value

    @property
    def untrusted(self) -> bool:
        """Whether the integrity is ``untrusted``."""
        return self.integrity == "untrusted"

    def at_least(self, level: str) -> bool:
        """Whether the confidentiality is ``level`` or higher."""
        return CONFIDENTIALITY.index(self.confidentiality) >= CONFIDENTIALITY.index(level)

    def join(self, other: Labels | None) -> Labels:
        """The label of content made from both: untrusted and the higher confidentiality
        win, sources are united (in first-seen order)."""
        if other is None or other is self or other == self:
            return self
        integrity: Integrity = "untrusted" if self.untrusted or other.untrusted else "trusted"
        confidentiality = max(
            self.confidentiality, other.confidentiality, key=CONFIDENTIALITY.index
        )
        sources = tuple(dict.fromkeys((*self.sources, *other.sources)))
        return Labels(integrity=integrity, confidentiality=confidentiality, sources=sources)


UNTRUSTED = Labels(integrity="untrusted")
"""The label a result gets when labelling it failed (fail closed)."""


def join_labels(labels: Iterable[Labels | None]) -> Labels | None:
    """The join of every label in ``labels``; ``None`` when none is given."""
    joined: Labels | None = None
    for label in labels:
        if label is not None and label is not joined:
            joined = label if joined is None else joined.join(label)
    return joined


def message_labels(message: Any) -> Labels | None:
    """The labels a transcript entry carries (``None`` for an unlabelled entry, a
    non-message, or a custom message whose ``labels`` is not a :class:`Labels`)."""
    own = getattr(message, "labels", None)
    return own if isinstance(own, Labels) else None
