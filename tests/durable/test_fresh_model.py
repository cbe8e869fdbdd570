"""Recovery with a model that never repeats itself and works after ``StreamDone``.

Real providers go on after the reply is complete (an HTTP provider drains its
response), and a real model answers a request sent again with something else. The
worker is killed at each step boundary and restarted: every reply the kernel consumed
comes back from its checkpoint (no completed request is sent again), no completed tool
call runs again, and the transcript is what the journal (what UIs saw) says.
"""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import encode_message
from mainspring.durable import Runs
from mainspring.testing import check_event_grammar

FRESH = {"MODEL": "fresh"}


def _plain(value: Any) -> Any:
    """JSON without timestamps (two runs never share those)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize(
    "crash",
    [
        "",
        "at:message_end:0",
        "at:tool_execution_end:1",
        "at:turn_end:1",
        "at:turn_start:2",
        "at:agent_end:None",
    ],
)
def test_a_reply_the_kernel_consumed_is_never_requested_again(workers: Any, crash: str) -> None:
    directory = workers.directory
    with Runs(workers.url) as runs:
        run_id = runs.submit("Do the three steps.")
        first = workers.start("w1", crash, **FRESH)
        if crash:
            workers.wait(lambda: (directory / "crashed").exists(), 60, f"the worker at {crash}")
            workers.kill(first)
            workers.start("w1", **FRESH)
        try:
            outcome = runs.result(run_id, timeout_s=120)
        except TimeoutError:
            raise AssertionError(workers.logs()) from None
        assert outcome["reason"] == "stop", (outcome, workers.logs())
        events = runs.events(run_id)
        transcript = [_plain(encode_message(m)) for m in runs.transcript(run_id)]

    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    # a journaled message_update keeps its delta, not the partial message
    check_event_grammar(
        [
            {**_plain(e), "message": {"role": "assistant"}}
            if e["type"] == "message_update"
            else _plain(e)
            for e in events
        ]
    )
    journaled = [_plain(e["message"]) for e in events if e["type"] == "message_end"]
    # the final transcript starts with the compaction's summary; the rest is as journaled
    assert transcript[0]["content"].startswith("Summary")
    assert journaled[-(len(transcript) - 1) :] == transcript[1:]
    replies = [m for m in journaled if m["role"] == "assistant"]
    assert len(replies) == 4
    sent = (directory / "requests.log").read_text().split()[1::2]
    assert len(sent) == len(replies), "a completed request was sent again"
    for reply, reply_id in zip(replies, sent, strict=True):
        assert reply_id in reply["content"][0]["text"]
    calls = [c["id"] for m in replies for c in m["content"] if c["type"] == "tool_call"]
    assert len(calls) == 3
    results = [m for m in journaled if m["role"] == "tool_result"]
    assert [r["tool_call_id"] for r in results] == calls
    assert not any(r["is_error"] for r in results), results
    tools = (directory / "tools.log").read_text().splitlines()
    assert sorted(line.split()[0] for line in tools if line.split()[2] == "done") == sorted(calls)
    assert all(tools.count(line) == 1 for line in tools), tools
