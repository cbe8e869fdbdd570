"""Generated SSE servers for the two real providers, over ``httpx.MockTransport``.

Generated server behaviour: well-formed streams then mutated (dropped, duplicated or
swapped events), or events in a random order; malformed payloads (invalid JSON, JSON
that is not an object, wrong field types), error objects inside a 200 stream, missing
``[DONE]``/``message_stop``, comments, CR/CRLF line endings, invalid UTF-8, a random
byte cut, random chunking; HTTP error statuses and wrong content types; a body that
ends with a transport error or goes silent (the provider's read timeout is 50 ms).

:func:`check_stream` is the property: ``stream()`` ends in exactly one ``StreamDone``
(its last event) or raises ``ProviderError``, never another exception, never a hang (each
case is bounded by ``asyncio.timeout``); no helper task is left; every
``ToolCallDelta``/``ToolCallEnd`` names a call that is open (started and not yet ended).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import reliability_harness as rh
from hypothesis import strategies as st

from mainspring import AbortSignal, UserMessage
from mainspring.providers.anthropic import AnthropicProvider
from mainspring.providers.base import (
    Model,
    ModelRequest,
    ProviderError,
    StreamDone,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from mainspring.providers.openai import OpenAIProvider

CASE_TIMEOUT_S = 5.0

# ------------------------------------------------------------------------ the server


class Body(httpx.AsyncByteStream):
    """A response body in the generated chunks, then the generated ending."""

    def __init__(self, chunks: list[bytes], ending: str) -> None:
        self.chunks = chunks
        self.ending = ending

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.ending == "hang":
            await asyncio.Event().wait()
        elif self.ending == "read_error":
            raise httpx.ReadError("connection reset by peer")
        elif self.ending == "protocol_error":
            raise httpx.RemoteProtocolError("peer closed connection without sending complete body")

    async def aclose(self) -> None:
        return None


@dataclass(frozen=True)
class Wire:
    """What the mock server answers: status, content type, body bytes, chunking, ending."""

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream"
    cuts: tuple[int, ...] = ()
    ending: str = "end"  # end | hang | read_error | protocol_error | connect_error

    def chunks(self) -> list[bytes]:
        points = sorted({c for c in self.cuts if 0 < c < len(self.body)})
        edges = [0, *points, len(self.body)]
        return [self.body[a:b] for a, b in itertools.pairwise(edges) if b > a]


def transport(first: Wire, later: Wire | None = None) -> httpx.MockTransport:
    """Answers the first request with ``first`` and every later one with ``later``."""
    seen = 0

    def handle(request: httpx.Request) -> httpx.Response:
        nonlocal seen
        seen += 1
        wire = first if seen == 1 or later is None else later
        if wire.ending == "connect_error":
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(
            wire.status,
            headers={"content-type": wire.content_type},
            stream=Body(wire.chunks(), wire.ending),
        )

    return httpx.MockTransport(handle)


# --------------------------------------------------------------------- serialisation

_ints = st.one_of(
    st.integers(-5, 2_000),
    st.sampled_from([None, "12", 1.5, 10**12, True]),
)
_texts = st.text(alphabet='ab ç€\n"\\{}', max_size=8)
_JUNK_JSON: list[Any] = [
    [],
    3,
    "a string",
    None,
    {"choices": "x"},
    {"choices": [1]},
    {"choices": [{"delta": "x"}]},
    {"choices": [{"delta": {"tool_calls": "x"}}]},
    {"choices": [{"delta": {"tool_calls": [{"function": "x", "index": "0"}]}}]},
    {"type": 5},
    {"type": "content_block_delta", "index": 0, "delta": "x"},
    {"type": "content_block_start", "content_block": None},
    {"type": "message_delta", "delta": {"stop_reason": 7}, "usage": "x"},
]
_RAW_DATA = ["[DONE]", "not json", "", "{", '{"choices": [', "\x00", "null"]


@dataclass(frozen=True)
class Raw:
    """A data line sent verbatim (not JSON-encoded)."""

    text: str


def _encode(items: list[tuple[str | None, Any]], newline: str, done: bool, multiline: bool) -> str:
    parts: list[str] = []
    for event, payload in items:
        lines = [] if event is None else [f"event: {event}"]
        if isinstance(payload, Raw):
            data = payload.text
        elif payload == ":comment":
            parts.append(": keep-alive\n\n")
            continue
        else:
            data = json.dumps(payload, ensure_ascii=False)
            if multiline:
                data = data.replace(", ", ",\n")
        lines += [f"data: {line}" for line in data.split("\n")]
        parts.append("\n".join(lines) + "\n\n")
    if done:
        parts.append("data: [DONE]\n\n")
    text = "".join(parts)
    return text.replace("\n", newline) if newline != "\n" else text


@st.composite
def wires(draw: st.DrawFn, items: st.SearchStrategy[list[tuple[str | None, Any]]]) -> Wire:
    events = draw(items)
    newline = draw(st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"]))
    text = _encode(events, newline, draw(st.booleans()), draw(st.booleans()))
    body = text.encode()
    if draw(st.integers(0, 4)) == 0:  # invalid UTF-8 somewhere
        at = draw(st.integers(0, len(body)))
        body = body[:at] + b"\xff\xfe" + body[at:]
    if draw(st.integers(0, 3)) == 0:  # the connection drops mid-body
        body = body[: draw(st.integers(0, len(body)))]
    status, content_type = draw(
        st.sampled_from(
            [(200, "text/event-stream")] * 12
            + [
                (200, "application/json"),
                (200, "text/html"),
                (429, "application/json"),
                (500, "text/plain"),
                (400, "application/json"),
                (401, "application/json"),
                (529, "text/event-stream"),
            ]
        )
    )
    if status != 200 or content_type == "application/json":
        body = draw(
            st.sampled_from(
                [
                    b'{"error": {"message": "overloaded", "type": "overloaded_error"}}',
                    b'{"error": {"message": "prompt is too long", "code": 400}}',
                    b'{"error": "quota", "code": "insufficient_quota"}',
                    b"<html>bad gateway</html>",
                    b"",
                    body,
                ]
            )
        )
    cuts = tuple(draw(st.lists(st.integers(0, max(len(body), 1)), max_size=6)))
    ending = draw(
        st.sampled_from(["end"] * 8 + ["hang", "read_error", "protocol_error", "connect_error"])
    )
    return Wire(body, status, content_type, cuts, ending)


def _mutate(draw: st.DrawFn, items: list[Any], junk: st.SearchStrategy[Any]) -> list[Any]:
    items = list(items)
    for _ in range(draw(st.integers(0, 3))):
        if not items:
            break
        op = draw(st.sampled_from(["drop", "dup", "swap", "junk"]))
        at = draw(st.integers(0, len(items) - 1))
        if op == "drop":
            del items[at]
        elif op == "dup":
            items.insert(at, items[at])
        elif op == "swap":
            other = draw(st.integers(0, len(items) - 1))
            items[at], items[other] = items[other], items[at]
        else:
            items.insert(at, draw(junk))
    return items


# ---------------------------------------------------------------------------- OpenAI

_finish = st.sampled_from(
    ["stop", "length", "tool_calls", "function_call", "content_filter", "weird", None, ""]
)
_call_index = st.sampled_from([0, 0, 1, None, "0"])
_call_id = st.sampled_from([None, "call_a", "call_b", ""])
_fragments = st.sampled_from(['{"text": ', '"hi"}', "{}", '{"ms": 1}', "", "{", {"a": 1}])


def _choice(delta: Any, finish: Any = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


_openai_chunk = st.one_of(
    st.builds(lambda t: _choice({"content": t}), _texts),
    st.builds(
        lambda key, t: _choice({key: t}),
        st.sampled_from(["reasoning_content", "reasoning"]),
        _texts,
    ),
    st.just(_choice({"role": "assistant"})),
    st.builds(
        lambda index, call_id, name, args: _choice(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": args},
                    }
                ]
            }
        ),
        _call_index,
        _call_id,
        st.sampled_from([None, "echo", "", "nope"]),
        _fragments,
    ),
    st.builds(lambda f: _choice({}, f), _finish),
    st.builds(
        lambda p, c, cached: {
            "choices": [],
            "usage": {
                "prompt_tokens": p,
                "completion_tokens": c,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        },
        _ints,
        _ints,
        _ints,
    ),
    st.builds(
        lambda kind, code: {"error": {"message": "server said no", "type": kind, "code": code}},
        st.sampled_from(["server_error", "invalid_request_error", None]),
        st.sampled_from([None, 500, "context_length_exceeded", "insufficient_quota", "x"]),
    ),
)
_openai_junk = st.one_of(
    st.sampled_from(_JUNK_JSON), st.sampled_from([Raw(t) for t in _RAW_DATA]), st.just(":comment")
)
_openai_events = st.tuples(
    st.sampled_from([None] * 10 + ["error", "message"]),
    st.one_of(_openai_chunk, _openai_chunk, _openai_chunk, _openai_junk),
)


@st.composite
def _openai_well_formed(draw: st.DrawFn) -> list[tuple[str | None, Any]]:
    items: list[Any] = [_choice({"role": "assistant", "content": ""})]
    items += [_choice({"content": t}) for t in draw(st.lists(_texts, max_size=3))]
    calls = draw(st.integers(0, 2))
    for index in range(calls):
        items.append(
            _choice(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": f"call_{index}",
                            "type": "function",
                            "function": {"name": "echo", "arguments": ""},
                        }
                    ]
                }
            )
        )
        for piece in ['{"text"', ': "x"}']:
            items.append(
                _choice({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    items.append(_choice({}, "tool_calls" if calls else draw(_finish)))
    items.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    items = _mutate(draw, items, st.one_of(_openai_chunk, _openai_junk))
    return [(None, item) for item in items]


openai_wires = wires(st.one_of(_openai_well_formed(), st.lists(_openai_events, max_size=10)))


# ------------------------------------------------------------------------- Anthropic

_block_index = st.sampled_from([0, 0, 1, 2, None, "0"])
_content_blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _texts),
    st.builds(
        lambda t, sig: {"type": "thinking", "thinking": t, "signature": sig},
        _texts,
        st.sampled_from(["", "sig", None]),
    ),
    st.builds(
        lambda call_id, name, given: {
            "type": "tool_use",
            "id": call_id,
            "name": name,
            "input": given,
        },
        st.sampled_from(["toolu_1", "toolu_2", "", None]),
        st.sampled_from(["echo", "", None, "nope"]),
        st.sampled_from([{}, {"text": "a"}, "x", None]),
    ),
    st.sampled_from(
        [{"type": "redacted_thinking", "data": "xx"}, {"type": "server_tool_use"}, {"type": 1}]
    ),
)
_block_deltas = st.one_of(
    st.builds(lambda t: {"type": "text_delta", "text": t}, _texts),
    st.builds(lambda t: {"type": "thinking_delta", "thinking": t}, _texts),
    st.builds(lambda s: {"type": "signature_delta", "signature": s}, st.sampled_from(["", "s"])),
    st.builds(lambda f: {"type": "input_json_delta", "partial_json": f}, _fragments),
    st.just({"type": "citations_delta", "citation": {}}),
)
_stop = st.sampled_from(
    [
        "end_turn",
        "max_tokens",
        "tool_use",
        "stop_sequence",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
        None,
        "weird",
    ]
)
_anthropic_event = st.one_of(
    st.builds(
        lambda v: {
            "type": "message_start",
            "message": {"id": "msg_1", "usage": {"input_tokens": v}},
        },
        _ints,
    ),
    st.builds(
        lambda i, b: {"type": "content_block_start", "index": i, "content_block": b},
        _block_index,
        _content_blocks,
    ),
    st.builds(
        lambda i, d: {"type": "content_block_delta", "index": i, "delta": d},
        _block_index,
        _block_deltas,
    ),
    st.builds(lambda i: {"type": "content_block_stop", "index": i}, _block_index),
    st.builds(
        lambda s, v: {
            "type": "message_delta",
            "delta": {"stop_reason": s},
            "usage": {"output_tokens": v},
        },
        _stop,
        _ints,
    ),
    st.just({"type": "message_stop"}),
    st.just({"type": "ping"}),
    st.builds(
        lambda kind, text: {"type": "error", "error": {"type": kind, "message": text}},
        st.sampled_from(
            ["overloaded_error", "api_error", "invalid_request_error", "rate_limit_error"]
        ),
        st.sampled_from(["boom", "prompt is too long: 300000 tokens > 200000 maximum"]),
    ),
)
_anthropic_junk = st.one_of(
    st.sampled_from(_JUNK_JSON), st.sampled_from([Raw(t) for t in _RAW_DATA]), st.just(":comment")
)


@st.composite
def _anthropic_item(draw: st.DrawFn) -> tuple[str | None, Any]:
    payload = draw(st.one_of(_anthropic_event, _anthropic_event, _anthropic_junk))
    kind = payload.get("type") if isinstance(payload, dict) else None
    name = draw(st.sampled_from([kind] * 8 + [None, "message", "error", "ping"]))
    return (name if isinstance(name, str) else None, payload)


@st.composite
def _anthropic_well_formed(draw: st.DrawFn) -> list[tuple[str | None, Any]]:
    items: list[Any] = [
        {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 5}}}
    ]
    kinds = draw(st.lists(st.sampled_from(["text", "thinking", "tool_use"]), max_size=3))
    for index, kind in enumerate(kinds):
        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": "hello"}
        elif kind == "thinking":
            block = {"type": "thinking", "thinking": ""}
            delta = {"type": "thinking_delta", "thinking": "hmm"}
        else:
            block = {"type": "tool_use", "id": f"toolu_{index}", "name": "echo", "input": {}}
            delta = {"type": "input_json_delta", "partial_json": '{"text": "a"}'}
        items += [
            {"type": "content_block_start", "index": index, "content_block": block},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    items += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": draw(_stop)},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    ]
    items = _mutate(draw, items, st.one_of(_anthropic_event, _anthropic_junk))
    return [(item.get("type") if isinstance(item, dict) else None, item) for item in items]


anthropic_wires = wires(
    st.one_of(_anthropic_well_formed(), st.lists(_anthropic_item(), max_size=10))
)


# ------------------------------------------------------------------- the property

MODEL = Model(provider="x", id="m", max_output_tokens=2_000)
REQUEST = ModelRequest(model=MODEL, messages=(UserMessage(content="hi"),))
TIMEOUT = {"connect": 1.0, "read": 0.05, "write": 1.0, "pool": 1.0}


def openai(t: httpx.MockTransport) -> OpenAIProvider:
    return OpenAIProvider("http://llm.test/v1", api_key="sk-test", transport=t, timeout=TIMEOUT)


def anthropic(t: httpx.MockTransport) -> AnthropicProvider:
    return AnthropicProvider("http://llm.test", api_key="sk-test", transport=t, timeout=TIMEOUT)


def check_stream(make: Callable[[httpx.MockTransport], Any], wire: Wire) -> None:
    async def main() -> None:
        provider = make(transport(wire))
        events: list[Any] = []
        outcome = "done"
        try:
            async with asyncio.timeout(CASE_TIMEOUT_S):
                async for event in provider.stream(REQUEST, AbortSignal()):
                    events.append(event)
        except TimeoutError:
            raise AssertionError(f"stream() hung; events so far: {events}") from None
        except ProviderError:
            outcome = "error"
        dones = [i for i, event in enumerate(events) if isinstance(event, StreamDone)]
        if outcome == "done":
            assert dones == [len(events) - 1], f"no single final StreamDone: {events}"
        else:
            assert not dones, f"StreamDone and then a ProviderError: {events}"
        # per id: calls started minus calls ended (a server repeating an id makes two
        # calls share it; the kernel's assembler renames them, kernel/stream.py)
        open_calls: dict[str, int] = {}
        for event in events:
            if isinstance(event, ToolCallStart):
                open_calls[event.id] = open_calls.get(event.id, 0) + 1
            elif isinstance(event, ToolCallDelta | ToolCallEnd):
                assert open_calls.get(event.id, 0) > 0, f"{event!r} for no open call: {events}"
                if isinstance(event, ToolCallEnd):
                    open_calls[event.id] -= 1
        rh.check_quiet_loop()

    asyncio.run(main())


FOLLOW_UP = {
    "openai": Wire(
        b'data: {"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}]}\n\n'
        b"data: [DONE]\n\n"
    ),
    "anthropic": Wire(
        b'event: message_start\ndata: {"type": "message_start", "message": {"id": "m"}}\n\n'
        b'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
        b'"content_block": {"type": "text", "text": "ok"}}\n\n'
        b'event: message_delta\ndata: {"type": "message_delta", "delta": '
        b'{"stop_reason": "end_turn"}}\n\n'
        b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    ),
}
