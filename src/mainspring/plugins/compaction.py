"""Built-in (essential): the fallback compaction, run last.

Drops the oldest whole turns and puts a :class:`~mainspring.messages.CompactionSummary`
marker in their place (the default ``convert_to_llm`` renders it for the model). A cut
never falls between a tool call and its results: it only happens where every earlier
call has its result. The kept tail is the longest that fits
``settings.compaction.keep_recent_tokens`` (and half the usable window), measured by
its own content (usage a kept reply reported describes the whole old request, not the
tail), and always includes the newest message. A plugin with a real summary (see the
``summary-compaction`` example) runs before this one and wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..contract.decisions import CompactionResult
from ..contract.markers import hookimpl
from ..effects import join_labels, message_labels
from ..messages import AssistantMessage, CompactionSummary, ToolResultMessage
from .tokens import estimate_tokens, tail_tokens

__all__ = ["compact", "cut_index", "safe_cut_points"]

CAPABILITIES = ("compaction",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""


def safe_cut_points(messages: Sequence[Any]) -> list[int]:
    """Indexes where the transcript may be cut: never while a tool call awaits its result."""
    points: list[int] = []
    waiting: set[str] = set()
    for index, message in enumerate(messages):
        if index > 0 and not waiting and not isinstance(message, ToolResultMessage):
            points.append(index)
        if isinstance(message, AssistantMessage):
            waiting = {call.id for call in message.tool_calls}
        elif isinstance(message, ToolResultMessage):
            waiting.discard(message.tool_call_id)
    return points


def cut_index(messages: Sequence[Any], budget_tokens: int) -> int | None:
    """Where to cut ``messages`` so the kept tail ``messages[index:]`` is the longest that fits.

    Returns the earliest safe cut point (:func:`safe_cut_points`) whose tail's content
    estimate (``estimate_tokens(tail, reported_usage=False)``) is at most
    ``budget_tokens``; when no tail fits, the latest safe cut (the shortest tail); ``None``
    when there is no safe cut point. One pass over the messages.
    """
    points = safe_cut_points(messages)
    if not points:
        return None
    tails = tail_tokens(messages)
    for index in points:
        if tails[index] <= budget_tokens:
            return index
    return points[-1]


@hookimpl(trylast=True)
def compact(messages: tuple[Any, ...], model: Any, agent: Any) -> CompactionResult | None:
    """Replace the oldest whole turns with a marker message."""
    settings = agent.settings.compaction
    window = model.context_window
    budget = min(settings.keep_recent_tokens, max(window - settings.reserve_for(window), 0) // 2)
    body = list(messages)
    earlier: list[CompactionSummary] = []
    while body and isinstance(body[0], CompactionSummary):
        earlier.append(body.pop(0))
    index = cut_index(body, budget)
    if index is None:
        return None
    dropped, kept = body[:index], body[index:]
    removed = sum(marker.removed for marker in earlier) + len(dropped)
    # a real summary written by an earlier (plugin) compaction is kept, not thrown away
    summaries: list[str] = []
    for old in earlier:
        if isinstance(old.details, dict) and old.details.get("source") == "fallback":
            summaries.extend(old.details.get("summaries", []))
        else:
            summaries.append(old.summary)
    text = (
        f"{removed} earlier messages were removed to save space; no summary is available "
        "for them beyond what is written above. Ask the user if something from before is "
        "needed."
        if summaries
        else f"{removed} earlier messages were removed to save space; no summary is available. "
        "Ask the user if something from before is needed."
    )
    marker = CompactionSummary(
        summary="\n\n".join([*summaries, text]),
        details={"source": "fallback", "summaries": summaries},
        removed=removed,
        tokens_before=estimate_tokens(messages),
        # what it stands for may have been untrusted or confidential: so is the marker
        labels=join_labels(message_labels(message) for message in (*earlier, *dropped)),
    )
    return CompactionResult((marker, *kept), summary=marker.summary)
