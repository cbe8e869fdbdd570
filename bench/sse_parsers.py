"""``python -m bench.sse_parsers``: the SSE parser alone, against httpx-sse's decoders.

Parses W5's OpenAI and Anthropic streams (one event per chunk, and the same bytes in
4 KiB chunks) with :class:`mainspring.providers.sse.SSEParser` and, when ``httpx-sse``
is installed, with its line and event decoders fed the same UTF-8-decoded text (its
fastest path: no response object, no conversion of its events). Prints µs per event,
the median of 31 interleaved rounds. A report, not a test.
"""

from __future__ import annotations

import codecs
import statistics
import time
from collections.abc import Callable

from mainspring.providers.sse import SSEParser

from .wire import anthropic_chunks, openai_chunks

ROUNDS = 31


def _ours(chunks: list[bytes]) -> int:
    parser = SSEParser()
    count = 0
    for chunk in chunks:
        count += len(parser.feed(chunk))
    return count + len(parser.close())


def _httpx_sse() -> Callable[[list[bytes]], int] | None:
    try:
        from httpx_sse._decoders import SSEDecoder, SSELineDecoder
    except ImportError:
        return None

    def parse(chunks: list[bytes]) -> int:
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        lines, events, count = SSELineDecoder(), SSEDecoder(), 0
        for chunk in chunks:
            for line in lines.decode(text.decode(chunk)):
                if events.decode(line) is not None:
                    count += 1
        return count

    return parse


def main() -> None:
    parsers: dict[str, Callable[[list[bytes]], int]] = {"mainspring": _ours}
    other = _httpx_sse()
    if other is not None:
        parsers["httpx-sse"] = other
    for name, events in (("openai", openai_chunks()), ("anthropic", anthropic_chunks())):
        whole = b"".join(events)
        by_4k = [whole[i : i + 4096] for i in range(0, len(whole), 4096)]
        for label, chunks in (("one event per chunk", events), ("4 KiB chunks", by_4k)):
            times: dict[str, list[float]] = {parser: [] for parser in parsers}
            for _ in range(ROUNDS):
                for parser, parse in parsers.items():
                    start = time.perf_counter()
                    parse(chunks)
                    times[parser].append(time.perf_counter() - start)
            figures = "  ".join(
                f"{parser} {statistics.median(t) / len(events) * 1e6:.2f} µs/event"
                for parser, t in times.items()
            )
            print(f"{name:9} {label:20} {figures}")


if __name__ == "__main__":
    main()
