"""mainspring-summary-compaction: compaction with a summary written by the model itself.

When the kernel compacts (``reason="threshold"`` or ``"overflow"``), this plugin keeps the
recent tail of the transcript, asks the run's model to summarise the part that is dropped,
and puts that summary in a :class:`~mainspring.CompactionSummary` marker in front of the
tail. The summary always has these Markdown sections, in this order::

    ## Goal / ## Progress / ## Decisions / ## Next steps / ## Files touched

How it works:

- **The cut** is the built-in fallback's: the same tail budget
  (``min(settings.compaction.keep_recent_tokens, usable window // 2)``) and the same
  :func:`mainspring.plugins.compaction.cut_index`, which never cuts between a tool call and
  its results and always keeps the newest message.
- **Earlier markers** at the head of the transcript are folded in: their summaries are
  given to the model to merge, their ``removed`` counts carry over, and the files they
  listed stay listed.
- **The summary request** goes to the provider of the run's model,
  ``agent.providers[model.provider]``, directly: a :class:`~mainspring.ModelRequest` with
  :data:`SYSTEM_PROMPT`, no tools, and one user message holding the dropped messages
  rendered as text (each cut to ``max_message_chars``, the oldest left out past
  ``max_input_chars``). It is not part of the run's event stream and it is not retried.
  The text deltas are collected until ``StreamDone``.
- **The answer is normalised**: the five sections are put in order, a missing one is
  added as ``- (none)``, prose without headings goes under *Progress*, and every file a
  dropped tool call named (arguments ``path``, ``file``, ``file_path``, ``filename``,
  ``paths``, ``files``) is listed under *Files touched*.

**When the summary fails** (no provider for the model, a provider error, a stream that
ends without ``StreamDone``, an empty answer, an abort) the hook returns ``None`` and
logs a warning on the ``mainspring_summary_compaction`` logger: the kernel then runs its
built-in fallback, which still frees the space (with a plain "messages were removed"
marker). A failed summary should not cost the run its compaction; raising instead would
leave the transcript uncompacted and the next request likely to overflow.
A *configuration* error (a bad option) does raise, so the kernel reports it as a
``hook_error`` naming this plugin.

Options, in ``Settings.plugin_options["mainspring-summary-compaction"]``:

- ``max_message_chars`` (int, default 2000): each dropped message's text is cut to this.
- ``max_input_chars`` (int, default ``3 * usable window tokens``, at least 4000): the
  rendered transcript sent for summarising is at most this long; the oldest messages are
  left out first.
- ``max_summary_chars`` (int, default ``usable window tokens``, at least 2000): the
  model's answer is cut to this before it is normalised, so the summary cannot refill the
  window it was meant to free.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from mainspring import (
    AbortSignal,
    Agent,
    AssistantMessage,
    CompactionResult,
    CompactionSummary,
    ImageContent,
    Model,
    ModelRequest,
    Provider,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    hookimpl,
)
from mainspring.compaction import cut_index, estimate_tokens, message_text
from mainspring.providers import StreamDone, TextDelta
from pydantic import BaseModel

__all__ = [
    "NAME",
    "PLUGIN_NAME",
    "SECTIONS",
    "SYSTEM_PROMPT",
    "SummaryError",
    "compact",
    "files_touched",
    "normalise_summary",
    "render_message",
    "render_transcript",
    "summarise",
]

CAPABILITIES = ("compaction",)
"""What this plugin does (its manifest; see ``docs/capabilities.md``)."""

PLUGIN_NAME = "mainspring-summary-compaction"
"""The plugin's one name, in-process (``plugins=[module]``) and installed (its entry point):
the key of its ``plugin_options`` and ``[plugins.NAME]`` table, and its ``--no-plugin`` name."""

NAME = PLUGIN_NAME  # the name this module exported before PLUGIN_NAME

SECTIONS: tuple[str, ...] = ("Goal", "Progress", "Decisions", "Next steps", "Files touched")
"""The sections of every summary, in order."""

SYSTEM_PROMPT = """\
You write the handover notes for a long conversation between a user and an AI agent that \
uses tools. The earlier part of the conversation is about to be removed to free the \
context window; your notes are all the agent will know of it. Write them from the \
transcript you are given, merging in the earlier summary if there is one.

Answer with exactly these five Markdown sections, in this order, and nothing else:

## Goal
What the user wants overall, with the constraints and preferences they stated.
## Progress
What has been done and found so far; be concrete (names, values, results, errors).
## Decisions
Choices made and why, including approaches that were tried and rejected.
## Next steps
What remains to be done, the most immediate first.
## Files touched
One "- path: what happened to it" line per file read, written or created; "- (none)" \
if there were none.

Be terse; bullet points are fine. Do not invent anything that is not in the transcript."""
"""The system prompt of the summary request."""

FILE_KEYS: tuple[str, ...] = ("path", "file", "file_path", "filename", "paths", "files")
"""Tool-call arguments that name files."""

log = logging.getLogger("mainspring_summary_compaction")

_HEADING = re.compile(
    r"^[ \t]{0,3}(?:#{1,6}[ \t]*)?(?:\*\*)?[ \t]*"
    r"(goal|progress|decisions|next[ \t]+steps|files[ \t]+touched)"
    r"[ \t]*(?:\*\*)?[ \t]*:?[ \t]*(?:\*\*)?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)


class SummaryError(Exception):
    """The model did not produce a usable summary."""


# -- rendering --------------------------------------------------------------------------


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters]"


def _blocks_text(content: str | Iterable[Any]) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append("[image]")
    return "\n".join(part for part in parts if part)


def render_message(message: Any, limit: int = 2_000) -> str | None:
    """One transcript entry as a line of text for the summariser (``None``: nothing to say).

    Thinking is left out; tool calls show their name and JSON arguments; failed assistant
    messages are marked as interrupted; custom messages show their role and text.
    """
    if isinstance(message, UserMessage):
        text = _blocks_text(message.content)
        return f"[user] {_cut(text, limit)}" if text else None
    if isinstance(message, AssistantMessage):
        parts: list[str] = []
        for block in message.content:
            if isinstance(block, TextContent) and block.text:
                parts.append(block.text)
            elif isinstance(block, ToolCall):
                arguments = json.dumps(block.arguments, ensure_ascii=False, default=str)
                parts.append(f"-> tool call {block.name}({arguments})")
        if not parts:
            return None
        label = (
            "[assistant, interrupted]"
            if message.stop_reason in ("error", "aborted")
            else "[assistant]"
        )
        joined = "\n".join(parts)
        return f"{label} {_cut(joined, limit)}"
    if isinstance(message, ToolResultMessage):
        status = ", error" if message.is_error else ""
        text = _blocks_text(message.content) or "(empty)"
        return f"[tool result: {message.tool_name}{status}] {_cut(text, limit)}"
    if isinstance(message, CompactionSummary):
        return f"[earlier summary] {_cut(message.summary, limit)}"
    role = getattr(message, "role", "?")
    text = message_text(message) if isinstance(message, BaseModel) else ""
    if not text:
        text = str(getattr(message, "text", "") or "")
    return f"[{role}] {_cut(text, limit)}" if text else None


def render_transcript(messages: Sequence[Any], max_chars: int, message_chars: int = 2_000) -> str:
    """The messages as text, at most ``max_chars`` long; the oldest are left out first."""
    lines = [line for line in (render_message(m, message_chars) for m in messages) if line]
    total = sum(len(line) + 2 for line in lines)
    omitted = 0
    while lines and total > max_chars:
        total -= len(lines.pop(0)) + 2
        omitted += 1
    if omitted:
        lines.insert(0, f"[... {omitted} earlier messages left out ...]")
    return "\n\n".join(lines)


def files_touched(messages: Iterable[Any]) -> list[str]:
    """The files named by the tool calls in ``messages``, in first-seen order."""
    found: dict[str, None] = {}
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            for key in FILE_KEYS:
                value = call.arguments.get(key)
                values = value if isinstance(value, list) else [value]
                for item in values:
                    if isinstance(item, str) and item.strip():
                        found.setdefault(item.strip(), None)
    return list(found)


def normalise_summary(text: str, files: Sequence[str] = ()) -> str:
    """Put the model's answer into the five sections, in order (see the module doc)."""
    bodies: dict[str, list[str]] = {section: [] for section in SECTIONS}
    canonical = {section.lower(): section for section in SECTIONS}
    matches = list(_HEADING.finditer(text))
    preamble = text[: matches[0].start()] if matches else text
    if preamble.strip():
        bodies["Progress"].append(preamble.strip())
    for index, match in enumerate(matches):
        key = re.sub(r"\s+", " ", match.group(1).lower())
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip()
        if body:
            bodies[canonical[key]].append(body)
    listed = "\n".join(bodies["Files touched"])
    missing = [path for path in files if path not in listed]
    if missing:
        bodies["Files touched"] = [
            body for body in bodies["Files touched"] if body.strip() not in ("- (none)", "(none)")
        ]
        bodies["Files touched"].append("\n".join(f"- {path}" for path in missing))
    out = []
    for section in SECTIONS:
        body = "\n\n".join(bodies[section]) or "- (none)"
        out.append(f"## {section}\n{body}")
    return "\n\n".join(out)


# -- the model call ---------------------------------------------------------------------


async def summarise(
    provider: Provider, model: Model, prompt: str, signal: AbortSignal | None = None
) -> str:
    """Ask ``model`` on ``provider`` for the summary of ``prompt``; the answer's text.

    Raises :class:`SummaryError` when the stream ends without ``StreamDone``, stops for
    another reason than ``stop``/``length``, is aborted or says nothing; provider errors
    pass through.
    """
    signal = signal if signal is not None else AbortSignal()
    request = ModelRequest(
        model=model, system_prompt=SYSTEM_PROMPT, messages=(UserMessage(content=prompt),)
    )
    parts: list[str] = []
    done: StreamDone | None = None
    stream = provider.stream(request, signal)
    try:
        async for event in stream:
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, StreamDone):
                done = event
                break
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    if signal.aborted:
        raise SummaryError("the summary request was aborted")
    if done is None:
        raise SummaryError("the summary stream ended before completion")
    if done.stop_reason not in ("stop", "length"):
        raise SummaryError(f"the summary request ended with stop_reason={done.stop_reason!r}")
    text = "".join(parts).strip()
    if not text:
        raise SummaryError("the model returned an empty summary")
    return text


def _prompt(previous: Sequence[str], transcript: str, files: Sequence[str]) -> str:
    parts: list[str] = []
    if previous:
        earlier = "\n\n".join(previous)
        parts.append(
            "The summary of the conversation before this part (merge it into yours):\n"
            f"<earlier-summary>\n{earlier}\n</earlier-summary>"
        )
    parts.append(
        f"The part of the conversation to summarise:\n<transcript>\n{transcript}\n</transcript>"
    )
    if files:
        parts.append("Files named by its tool calls: " + ", ".join(files))
    parts.append("Write the summary now, in the five sections.")
    return "\n\n".join(parts)


# -- options ----------------------------------------------------------------------------


def _option(options: dict[str, Any], key: str, default: int) -> int:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"plugin option {NAME}.{key} must be a positive int, got {value!r} "
            f'(Settings.plugin_options["{NAME}"])'
        )
    return value


# -- the hook ---------------------------------------------------------------------------


@hookimpl
async def compact(
    messages: tuple[Any, ...], model: Model, reason: str, agent: Agent, signal: AbortSignal
) -> CompactionResult | None:
    """Summarise the dropped part with the model; ``None`` (the fallback runs) on failure."""
    settings = agent.settings.compaction
    options = dict(agent.settings.plugin_options.get(NAME, {}))
    window = model.context_window
    usable = max(window - settings.reserve_for(window), 0)
    message_chars = _option(options, "max_message_chars", 2_000)
    input_chars = _option(options, "max_input_chars", max(4_000, usable * 3))
    summary_chars = _option(options, "max_summary_chars", max(2_000, usable))

    body = list(messages)
    previous: list[str] = []
    files: list[str] = []
    removed_before = 0
    while body and isinstance(body[0], CompactionSummary):
        marker = body.pop(0)
        removed_before += marker.removed
        previous.append(marker.summary)
        details = marker.details
        if isinstance(details, dict) and isinstance(details.get("files"), list):
            files += [path for path in details["files"] if isinstance(path, str)]
    index = cut_index(body, min(settings.keep_recent_tokens, usable // 2))
    if index is None:
        return None
    dropped, kept = body[:index], body[index:]
    files = list(dict.fromkeys([*files, *files_touched(dropped)]))

    provider = agent.providers.get(model.provider)
    if provider is None:
        log.warning("no provider %r for the summary; using the built-in compaction", model.provider)
        return None
    prompt = _prompt(previous, render_transcript(dropped, input_chars, message_chars), files)
    try:
        answer = await summarise(provider, model, prompt, signal)
    except Exception as error:  # any failure of the summary: let the fallback compact
        log.warning("summary failed (%s); using the built-in compaction", error)
        return None
    summary = normalise_summary(_cut(answer, summary_chars), files)
    marker = CompactionSummary(
        summary=summary,
        removed=removed_before + len(dropped),
        tokens_before=estimate_tokens(messages),
        details={"plugin": NAME, "reason": reason, "files": files},
    )
    return CompactionResult((marker, *kept), summary=summary, details={"plugin": NAME})
