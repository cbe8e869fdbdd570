"""How tool calls reach the embedded model and come back from it.

A 135M model does not choose tools on its own (offered them with ``tool_choice:
"auto"``, it practically never calls one), so the ``local`` provider can *force* a call
and *constrain* it: with ``tool_mode="force_first"`` a request whose last message is a
user message is sent with llama.cpp's ``json_schema`` constrained decoding, whose schema
(:func:`tool_call_schema`) admits exactly one object ``{"name": ..., "arguments":
...}`` naming one of the request's tools with arguments that match that tool's JSON
Schema. The tools are still sent (``tool_choice: "none"``) so the chat template shows
the model their names and descriptions. The reply is JSON text, which
:func:`as_tool_call` turns back into the ordinary tool-call stream events. After tool
results the request goes without tools, its tool exchanges told in words
(:func:`exchanges_as_text`), so the model answers in text.

So every forced call is well-formed and names a real tool with schema-valid arguments,
whatever the model's size; whether it is the *right* call is still up to the model.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from ..messages import AssistantMessage, TextContent, ToolResultMessage, UserMessage
from .base import (
    ModelRequest,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
)

__all__ = [
    "ToolMode",
    "as_tool_call",
    "dedupe_tool_calls",
    "exchanges_as_text",
    "prepare_request",
    "tool_call_schema",
]

ToolMode: TypeAlias = Literal["force_first", "auto", "off"]

_NAME = re.compile(r'"name"\s*:\s*"([^"\\]*)"')
_ARGUMENTS = re.compile(r'"arguments"\s*:\s*')
_MAX_REF_DEPTH = 16


def prepare_request(
    request: ModelRequest, tool_mode: ToolMode = "force_first"
) -> tuple[ModelRequest, dict[str, Any]]:
    """The request to send to the server and the extra body fields it needs.

    Always sets ``temperature: 0``. With tools and ``tool_mode="force_first"``: if the
    last message is a user message, adds ``tool_choice: "none"`` and ``json_schema``
    (:func:`tool_call_schema`), so the reply is one constrained call; otherwise (after
    tool results) drops the tools so the model answers in text. ``"auto"`` keeps the
    tools with ``tool_choice: "auto"``; ``"off"`` drops them. ``request`` is not changed.
    """
    options: dict[str, Any] = {"temperature": 0}
    if not request.tools:
        return request, options
    if tool_mode == "off":
        return request.model_copy(update={"tools": ()}), options
    if tool_mode == "auto":
        options["tool_choice"] = "auto"
        return request, options
    last_role = getattr(request.messages[-1], "role", None) if request.messages else None
    if last_role != "user":
        answer = {"tools": (), "messages": exchanges_as_text(request.messages)}
        return request.model_copy(update=answer), options
    options["tool_choice"] = "none"
    options["json_schema"] = tool_call_schema(request.tools)
    return request, options


def exchanges_as_text(messages: Sequence[Any]) -> tuple[Any, ...]:
    """``messages`` with every tool exchange told in words, for a request without tools.

    An assistant message keeps only its text (one with none is left out), and each run
    of tool results is told as ``The tool NAME returned:`` and the result's text per
    call, added to the user message before it when nothing came between (else a user
    message of its own). A small model shown its own ``<tool_call>`` turns in a request
    that offers no tools imitates them instead of answering; given the question and what
    the tools returned in one turn, it answers from them. Other messages are kept.
    """
    told: list[Any] = []
    results: list[str] = []
    for message in messages:
        if isinstance(message, ToolResultMessage):
            results.append(f"The tool {message.tool_name} returned:\n{message.text}")
            continue
        _tell(told, results)
        if isinstance(message, AssistantMessage) and message.tool_calls:
            if message.text:
                text_only = (TextContent(text=message.text),)
                told.append(message.model_copy(update={"content": text_only}))
            continue
        told.append(message)
    _tell(told, results)
    return tuple(told)


def _tell(told: list[Any], results: list[str]) -> None:
    """Add ``results`` (then empty it) to ``told``'s last user message or as one."""
    if not results:
        return
    text = "\n\n".join(results)
    results.clear()
    last = told[-1] if told else None
    if isinstance(last, UserMessage) and isinstance(last.content, str):
        told[-1] = last.model_copy(update={"content": f"{last.content}\n\n{text}"})
    else:
        told.append(UserMessage(content=text))


def tool_call_schema(tools: tuple[ToolSpec, ...], *, loose: bool = False) -> dict[str, Any]:
    """The JSON Schema of one call of one of ``tools``: ``{"name", "arguments"}``.

    Each tool's parameters are inlined (``$ref`` into its own ``$defs`` resolved, so the
    schema has no references); a tool whose references are circular or too deep gets
    ``{"type": "object"}`` arguments. ``loose=True`` gives every tool that, for a server
    that cannot compile the precise schema.
    """
    choices = []
    for tool in tools:
        arguments = {"type": "object"} if loose else _inlined(tool.parameters)
        choices.append(
            {
                "type": "object",
                "properties": {"name": {"enum": [tool.name]}, "arguments": arguments},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return choices[0] if len(choices) == 1 else {"anyOf": choices}


def _inlined(parameters: Mapping[str, Any]) -> Any:
    definitions = parameters.get("$defs") or parameters.get("definitions") or {}

    def resolve(node: Any, depth: int) -> Any:
        if depth > _MAX_REF_DEPTH:
            raise RecursionError
        if isinstance(node, list):
            return [resolve(item, depth) for item in node]
        if not isinstance(node, Mapping):
            return node
        reference = node.get("$ref")
        if isinstance(reference, str):
            name = reference.rsplit("/", 1)[-1]
            if name not in definitions:
                raise RecursionError
            return resolve(definitions[name], depth + 1)
        return {
            key: resolve(value, depth)
            for key, value in node.items()
            if key not in ("$defs", "definitions", "$schema", "title")
        }

    try:
        resolved = resolve(parameters, 0)
    except RecursionError:
        return {"type": "object"}
    return resolved if isinstance(resolved, dict) else {"type": "object"}


async def as_tool_call(events: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
    """Turn a constrained reply (one JSON call as text) into tool-call events.

    The text is held until :class:`StreamDone`. A complete call becomes
    ``ToolCallStart``, one ``ToolCallDelta`` with its arguments and ``ToolCallEnd``,
    then ``StreamDone("tool_use")``; a call cut short (the token limit, the repetition
    guard) keeps the tool's name and the arguments written so far, and the stop reason,
    so the kernel answers it as cut off. Text without a tool name passes on as text.
    Other events pass through.
    """
    parts: list[str] = []
    async for event in events:
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, StreamDone):
            for item in _call_events("".join(parts), event):
                yield item
            return
        else:
            yield event
    if parts:  # no StreamDone: the kernel reports the incomplete stream
        yield TextDelta("".join(parts))


def _call_events(text: str, done: StreamDone) -> list[StreamEvent]:
    call_id = f"call_{secrets.token_hex(8)}"
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        arguments = json.dumps(data.get("arguments", {}), ensure_ascii=False)
        return [
            ToolCallStart(call_id, data["name"]),
            ToolCallDelta(call_id, arguments),
            ToolCallEnd(call_id),
            StreamDone(
                "tool_use" if done.stop_reason == "stop" else done.stop_reason, done.response_id
            ),
        ]
    name = _NAME.search(text)
    if name is None:
        return [TextDelta(text), done] if text else [done]
    start = _ARGUMENTS.search(text)
    fragment = text[start.end() :] if start is not None else ""
    stop = done.stop_reason if done.stop_reason in ("length", "repetition") else "tool_use"
    return [
        ToolCallStart(call_id, name.group(1)),
        ToolCallDelta(call_id, fragment),
        ToolCallEnd(call_id),
        StreamDone(stop, done.response_id),
    ]


async def dedupe_tool_calls(events: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
    """Drop tool calls whose name and arguments repeat an earlier call of the reply.

    A call's events are held back until its :class:`ToolCallEnd`; a call still open when
    the stream ends is released as it is (the kernel treats it as incomplete).
    """
    seen: set[tuple[str, str]] = set()
    pending: dict[str, tuple[str, list[StreamEvent], list[str]]] = {}
    async for event in events:
        if isinstance(event, ToolCallStart):
            pending[event.id] = (event.name, [event], [])
        elif isinstance(event, ToolCallDelta) and event.id in pending:
            pending[event.id][1].append(event)
            pending[event.id][2].append(event.arguments_json_fragment)
        elif isinstance(event, ToolCallEnd) and event.id in pending:
            name, held, fragments = pending.pop(event.id)
            key = (name, _canonical_json("".join(fragments)))
            if key in seen:
                continue
            seen.add(key)
            for item in held:
                yield item
            yield event
        else:
            yield event
    for _name, held, _fragments in pending.values():
        for item in held:
            yield item


def _canonical_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return text
