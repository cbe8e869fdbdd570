"""Information-flow rules: who chose where data or money goes.

A call whose effects include one of the policy's ``flow_effects`` (default ``egress``,
``send``, ``write``) sends something somewhere; its arguments whose role is one of
``flow_roles`` (default ``principal``, ``url``) say where. Using the call's
:class:`~mainspring.provenance.Provenance`, each such value is:

- **named**: seen in a user message or the system prompt, or in trusted content (a tool
  result labelled ``trusted``; an unlabelled one when ``unlabelled_results = "trusted"``):
  fine;
- **from untrusted content**: seen only in untrusted results: an injected instruction may
  have chosen it (the ``untrusted_flow`` action);
- **model-written** (seen nowhere, or not traced): fine in a clean context; while the
  context holds untrusted content it may have been dictated in a disguise the model
  decoded (``eve (at) evil.com``), so the ``untrusted_flow`` action applies too.

A link (``http(s)://...``) inside a ``content`` argument is a destination too (whoever
follows it sends a request there): it is checked the same way. And a call whose
``content`` arguments carry data from a result labelled ``confidential``
or higher to a destination that is not named gets the ``confidential_flow`` action.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from mainspring.provenance import Origin, Provenance, Traced

from .config import Policy

__all__ = ["flow_rules"]

_SHOWN = 80
_URL = re.compile(r"https?://[^\s\"'<>()\[\]{}]+")
_MAX_LINKS = 16
"""Links of one content value traced at most."""


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[: _SHOWN - 1] + "…")


def _where(origin: Origin) -> str:
    if origin.kind == "tool_result":
        return f"the result of {origin.tool_name} (call {origin.tool_call_id})"
    return "a compaction summary"


def _problem(
    traced: Traced,
    trusted: Callable[[Origin], bool],
    tainted: Callable[[], bool],
    name: str,
) -> str | None:
    """Why the value ``traced`` of destination argument ``name`` is not named, or ``None``."""
    kinds = traced.kinds
    if kinds & {"user", "system"}:
        return None
    seen = [o for o in traced.origins if o.kind in ("tool_result", "summary")]
    if any(trusted(origin) for origin in seen):
        return None
    if seen:
        return (
            f"{name}={_shown(traced.value)} was not named by the user; it comes from "
            f"untrusted content ({', '.join(_where(o) for o in seen[:3])})"
        )
    if tainted():
        return (
            f"{name}={_shown(traced.value)} was not named by the user, and the model wrote it "
            "while untrusted content was in its context"
        )
    return None


def flow_rules(
    policy: Policy,
    effects: frozenset[str],
    roles: Mapping[str, str],
    provenance: Provenance | None,
) -> list[tuple[str, str]]:
    """``(action, reason)`` for each flow rule the call breaks (``action``: ``"ask"`` or
    ``"block"``; rules set to ``"allow"`` are not checked)."""
    if not (effects & policy.flow_effects):
        return []
    destinations = [name for name, role in roles.items() if role in policy.flow_roles]
    if not destinations:
        return []
    unlabelled_untrusted = policy.unlabelled_results == "untrusted"

    def trusted(origin: Origin) -> bool:
        if origin.labels is None:
            return not unlabelled_untrusted
        return not origin.labels.untrusted

    found: list[tuple[str, str]] = []
    if provenance is None:  # a gate called without it: nothing is vouched for
        if policy.untrusted_flow != "allow":
            found.append((policy.untrusted_flow, "where this call sends to cannot be traced"))
        return found
    taint: list[bool] = []

    def tainted() -> bool:
        if not taint:
            taint.append(provenance.context_untrusted(unlabelled_untrusted))
        return taint[0]

    unnamed: list[str] = []
    for name in destinations:
        for traced in provenance.get(name, ()):
            problem = _problem(traced, trusted, tainted, name)
            if problem is not None:
                unnamed.append(problem)
            elif not traced.kinds & {"user", "system"}:
                unnamed.append("")  # named by trusted content only, not by the user
    contents = [name for name, role in roles.items() if role == "content"]
    links = [
        (name, link)
        for name in contents
        for traced in provenance.get(name, ())
        for link in _URL.findall(traced.value)[:_MAX_LINKS]
    ]
    # a link in what is sent is a destination too: whoever follows it sends a request there
    link_problems = [
        _problem(provenance.trace(link), trusted, tainted, f"a link in {name}")
        for name, link in links
    ]
    problems = [p for p in (*unnamed, *link_problems) if p]
    if problems and policy.untrusted_flow != "allow":
        found.append((policy.untrusted_flow, f"information flow: {problems[0]}"))
    if unnamed and policy.confidential_flow != "allow":
        carried = [origin for name in contents for origin in provenance.carries(name)]
        if carried:
            found.append(
                (
                    policy.confidential_flow,
                    "information flow: the call carries confidential data from "
                    f"{_where(carried[0])} to a destination the user did not name",
                )
            )
    return found
