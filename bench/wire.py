"""W5: the wire decoders: real SSE bytes of a 2,000-delta reply, per delta.

The OpenAI and Anthropic providers stream a reply of 2,000 text deltas, in the bytes
each API sends (one SSE event per chunk, as a server flushes each token), from an
``httpx.MockTransport``: the whole provider path (request, response checks, SSE parsing,
JSON decoding, stream events, the abortable read) minus the network. The floor parses
the same chunks with ``json.loads`` per ``data:`` line, nothing else. The note gives the
cost of reading the same response through httpx alone (no parsing).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from mainspring import AbortSignal
from mainspring.providers.anthropic import AnthropicProvider
from mainspring.providers.base import Model, ModelRequest, StreamEvent, TextDelta
from mainspring.providers.http import HTTPProvider
from mainspring.providers.openai import OpenAIProvider

from .common import Config, Row, median, settle

__all__ = ["anthropic_chunks", "openai_chunks", "run_w5"]

DELTAS = 2_000
_PIECES = [f" w{i % 10}" for i in range(DELTAS)]


def openai_chunks(pieces: list[str] = _PIECES) -> list[bytes]:
    """A Chat Completions stream of ``pieces``, one SSE event per chunk."""
    head = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "system_fingerprint": "fp_bench",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        body = {**head, "choices": [choice] if delta is not None else [], **extra}
        return f"data: {json.dumps(body)}\n\n".encode()

    usage = {"prompt_tokens": 120, "completion_tokens": len(pieces), "total_tokens": 0}
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": piece}) for piece in pieces),
        chunk({}, "stop"),
        f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n".encode(),
        b"data: [DONE]\n\n",
    ]


def anthropic_chunks(pieces: list[str] = _PIECES) -> list[bytes]:
    """A Messages API stream of ``pieces``, one SSE event per chunk."""

    def event(body: dict[str, Any]) -> bytes:
        return f"event: {body['type']}\ndata: {json.dumps(body)}\n\n".encode()

    start = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-bench",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 1},
    }
    return [
        event({"type": "message_start", "message": start}),
        event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        ),
        b'event: ping\ndata: {"type": "ping"}\n\n',
        *(
            event(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                }
            )
            for piece in pieces
        ),
        event({"type": "content_block_stop", "index": 0}),
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(pieces)},
            }
        ),
        event({"type": "message_stop"}),
    ]


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


def _transport(chunks: list[bytes]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream; charset=utf-8"}
        return httpx.Response(200, headers=headers, stream=_Chunks(chunks))

    return httpx.MockTransport(handle)


_MODEL = Model(provider="bench", id="bench-model", context_window=200_000, max_output_tokens=4_096)
_REQUEST = ModelRequest(model=_MODEL, system_prompt="", messages=(), tools=())


async def _provider_side(provider: HTTPProvider) -> float:
    settle()
    start = time.process_time()
    events: list[StreamEvent] = []
    async for event in provider.stream(_REQUEST, AbortSignal()):
        events.append(event)
    total = time.process_time() - start
    text = [event.text for event in events if isinstance(event, TextDelta)]
    if text != _PIECES:
        raise RuntimeError(f"W5 {provider.name} did not decode as scripted ({len(text)} deltas)")
    return total / DELTAS


def _floor_side(chunks: list[bytes]) -> float:
    settle()
    start = time.process_time()
    count = 0
    for chunk in chunks:
        for line in chunk.split(b"\n"):
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                json.loads(line[6:])
                count += 1
    total = time.process_time() - start
    if count < DELTAS:
        raise RuntimeError("W5 floor parsed too few events")
    return total / DELTAS


async def _httpx_alone(chunks: list[bytes]) -> float:
    async with httpx.AsyncClient(transport=_transport(chunks)) as client:
        settle()
        start = time.process_time()
        async with client.stream("POST", "http://bench.test/", json={}) as response:
            async for _ in response.aiter_bytes():
                pass
        return (time.process_time() - start) / DELTAS


def _us(value: float) -> str:
    return f"{value * 1e6:.2f} µs"


async def _measure(
    label: str,
    chunks: list[bytes],
    build: Callable[[httpx.MockTransport], HTTPProvider],
    config: Config,
) -> Row:
    provider = build(_transport(chunks))
    ms: list[float] = []
    floor: list[float] = []
    bare: list[float] = []
    try:
        for rep in range(config.reps + 1):
            one, other, alone = (
                await _provider_side(provider),
                _floor_side(chunks),
                await _httpx_alone(chunks),
            )
            if rep:
                ms.append(one)
                floor.append(other)
                bare.append(alone)
    finally:
        aclose = getattr(provider, "aclose", None)
        if aclose is not None:
            await aclose()
    per_delta, floor_delta = median(ms), median(floor)
    return Row(
        f"W5 {label} per delta (CPU)",
        _us(per_delta),
        _us(floor_delta),
        per_delta / floor_delta,
        "info",
        None,
        f"httpx read alone {median(bare) * 1e6:.2f} µs/delta",
    )


async def run_w5(config: Config) -> list[Row]:
    """W5 rows: the OpenAI and the Anthropic decoder, per delta, against ``json.loads``."""
    return [
        await _measure(
            "openai",
            openai_chunks(),
            lambda t: OpenAIProvider("http://bench.test/v1", "sk-bench", transport=t),
            config,
        ),
        await _measure(
            "anthropic",
            anthropic_chunks(),
            lambda t: AnthropicProvider("http://bench.test", "sk-bench", transport=t),
            config,
        ),
    ]
