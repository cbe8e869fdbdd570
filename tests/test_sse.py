"""The incremental SSE parser: WHATWG event-stream rules plus the two documented departures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring.providers.sse import SSEError, SSEEvent, SSEParser, aiter_sse

FIXTURES = Path(__file__).parent / "fixtures" / "sse"


def parse(*chunks: bytes | str) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events + parser.close()


def test_single_event_with_default_type() -> None:
    assert parse(b"data: hello\n\n") == [SSEEvent(data="hello")]


def test_multi_line_data_is_joined_with_newlines() -> None:
    [event] = parse(b"data: one\ndata: two\ndata:\n\n")
    assert event.data == "one\ntwo\n"


def test_event_field_names_the_event_and_resets_after_dispatch() -> None:
    events = parse(b"event: message_start\ndata: {}\n\ndata: x\n\n")
    assert [e.event for e in events] == ["message_start", "message"]


def test_comments_and_unknown_fields_are_ignored() -> None:
    events = parse(b": keep-alive\n\n:ping\nfoo: bar\ndata: x\n\n")
    assert events == [SSEEvent(data="x")]


@pytest.mark.parametrize("newline", [b"\r\n", b"\r", b"\n"])
def test_all_line_endings(newline: bytes) -> None:
    body = b"event: e" + newline + b"data: a" + newline + b"data: b" + newline + newline
    assert parse(body) == [SSEEvent(data="a\nb", event="e")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert parse(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SSEEvent(data="a\nb")]


def test_cr_at_chunk_end_followed_by_text_is_a_line_end() -> None:
    assert parse(b"data: a\r", b"\rdata: b\n\n") == [SSEEvent(data="a"), SSEEvent(data="b")]


def test_final_event_without_blank_line_is_dispatched_incomplete() -> None:
    events = parse(b"data: first\n\ndata: [DONE]\n")
    assert events == [SSEEvent(data="first"), SSEEvent(data="[DONE]", complete=False)]


def test_stream_cut_mid_line_dispatches_the_fragment_incomplete() -> None:
    [event] = parse(b'data: {"choices": [{"del')
    assert event == SSEEvent(data='{"choices": [{"del', complete=False)


def test_stream_ending_on_blank_line_leaves_nothing_pending() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: x\n\n") == [SSEEvent(data="x")]
    assert parser.close() == []


def test_event_without_data_is_not_dispatched() -> None:
    assert parse(b"event: ping\n\nid: 3\n\n") == []


def test_field_parsing_details() -> None:
    events = parse(b"data\n\ndata:no-space\n\ndata:  two-spaces\n\n")
    assert [e.data for e in events] == ["", "no-space", " two-spaces"]


def test_id_persists_and_retry_is_parsed() -> None:
    body = b"id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nid: x\x00y\nretry: soon\ndata: c\n\n"
    events = parse(body)
    assert [(e.id, e.retry) for e in events] == [("7", 1500), ("7", None), ("7", None)]


def test_utf8_split_across_chunks_and_bom_dropped() -> None:
    body = "\ufeffdata: wörld ✓\n\n".encode()
    chunks = [body[i : i + 1] for i in range(len(body))]
    assert parse(*chunks) == [SSEEvent(data="wörld ✓")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    [event] = parse(b"data: \xff\xfe ok\n\n")
    assert event.data == "\ufffd\ufffd ok"


def test_text_chunks_are_accepted() -> None:
    assert parse("data: a\n", "\n") == [SSEEvent(data="a")]


def test_oversized_line_raises() -> None:
    parser = SSEParser(max_size=10)
    with pytest.raises(SSEError, match="line longer"):
        parser.feed(b"data: " + b"x" * 20)


def test_oversized_event_raises() -> None:
    parser = SSEParser(max_size=10)
    with pytest.raises(SSEError, match="event larger"):
        parser.feed(b"data: 123456\ndata: 123456\n")


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_any_chunking_gives_the_same_events(sizes: list[int]) -> None:
    body = (FIXTURES / "anthropic_thinking_tool_use.txt").read_bytes().replace(b"\n", b"\r\n")
    chunks: list[bytes] = []
    position = 0
    for size in sizes * (len(body) // sum(sizes) + 1):
        if position >= len(body):
            break
        chunks.append(body[position : position + size])
        position += size
    assert parse(*chunks) == parse(body)
    assert len(parse(body)) == 19


async def test_aiter_sse_parses_an_async_byte_stream() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: a\n"
        yield b"\ndata: b"

    events = [event async for event in aiter_sse(chunks())]
    assert events == [SSEEvent(data="a"), SSEEvent(data="b", complete=False)]


def test_a_line_growing_over_many_chunks_raises_at_the_cap() -> None:
    parser = SSEParser(max_size=100)
    parser.feed(b"data: ")
    for _ in range(9):
        assert parser.feed(b"x" * 10) == []  # 96 characters so far: still under the cap
    with pytest.raises(SSEError, match="line longer than 100 characters"):
        parser.feed(b"x" * 10)


def test_a_line_in_many_pieces_is_one_line() -> None:
    pieces = [b"da", b"ta", b": ", *([b"ab"] * 50), b"\r", b"\n", b"\r\n"]
    assert parse(*pieces) == [SSEEvent(data="ab" * 50)]
