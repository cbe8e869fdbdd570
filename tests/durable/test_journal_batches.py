"""The journal is written in batches, and still before anyone sees an event.

- A listener the agent factory subscribes (before the worker journals anything) sees each
  event only once the journal holds it.
- With nobody but the journal listening, events are written in batches before each step:
  a worker killed inside a tool call recovers as one with listeners does (the call in
  flight runs again only if idempotent), the journal holds every event once, in order,
  and an approval request is in the journal while the call waits for a person.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mainspring.durable import INTERRUPTED, Runs
from mainspring.testing import check_event_grammar

PROMPT = "Do the three steps."


def _plain(value: Any) -> Any:
    """JSON without timestamps (two executions never share those)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _settle(workers: Any, runs: Runs, run_id: str) -> dict[str, Any]:
    try:
        outcome: dict[str, Any] = runs.result(run_id, timeout_s=120)
    except TimeoutError:
        raise AssertionError(workers.logs()) from None
    return outcome


def test_a_subscriber_the_factory_added_sees_only_journaled_events(workers: Any) -> None:
    with Runs(workers.url) as runs:
        run_id = runs.submit(PROMPT)
        workers.start("w1", FACTORY_LISTENER="1", LISTEN="0")
        assert _settle(workers, runs, run_id)["reason"] == "stop"
        journaled = [(e["seq"], e["type"]) for e in runs.events(run_id)]
    logs = list(Path(workers.directory).glob("factory-*.log"))
    seen = [line.split() for path in logs for line in path.read_text().splitlines()]
    assert [(int(seq), kind) for seq, kind, _ in seen] == journaled
    assert [line for line in seen if line[2] != "journaled"] == []


def _recovered(workers: Any, crash: str) -> tuple[list[dict[str, Any]], list[Any], list[str]]:
    """A run whose worker (no listeners) is killed at ``crash``, finished by another: its
    events, the tool results it journaled, the tool log."""
    directory = workers.directory
    with Runs(workers.url) as runs:
        run_id = runs.submit(PROMPT)
        first = workers.start("w1", crash, LISTEN="0")
        workers.wait(lambda: (directory / "crashed").exists(), 60, f"the worker at {crash}")
        workers.kill(first)
        workers.start("w1", LISTEN="0")
        assert _settle(workers, runs, run_id)["reason"] == "stop"
        events = runs.events(run_id)
    results = [
        e["message"]
        for e in events
        if e["type"] == "message_end" and e["message"]["role"] == "tool_result"
    ]
    tools = (directory / "tools.log").read_text().splitlines()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    check_event_grammar(
        [
            {**_plain(e), "message": {"role": "assistant"}}
            if e["type"] == "message_update"
            else _plain(e)
            for e in events
        ]
    )
    return events, results, tools


def test_without_listeners_an_idempotent_call_in_flight_runs_again(workers: Any) -> None:
    events, results, tools = _recovered(workers, "tool")

    assert tools.count("c2 note start") == 2
    assert all(tools.count(line) == 1 for line in tools if not line.startswith("c2 note"))
    assert [(r["tool_call_id"], r["is_error"]) for r in results] == [
        ("c0", False),
        ("c1", False),
        ("c2", False),
    ]
    ends = [e for e in events if e["type"] == "tool_execution_end"]
    assert [e["tool_call_id"] for e in ends] == ["c0", "c1", "c2"]


def test_without_listeners_a_call_in_flight_not_idempotent_is_not_run_again(
    workers: Any,
) -> None:
    _, results, tools = _recovered(workers, "tool_once")

    assert tools.count("c1 append start") == 1
    assert "c1 append done" not in tools
    assert [(r["tool_call_id"], r["is_error"]) for r in results] == [
        ("c0", False),
        ("c1", True),
        ("c2", False),
    ]
    assert results[1]["content"][0]["text"] == INTERRUPTED.format(name="append")


@pytest.mark.parametrize("allow", [True, False])
def test_without_listeners_an_approval_request_is_journaled_while_the_call_waits(
    workers: Any, allow: bool
) -> None:
    with Runs(workers.url) as runs:
        run_id = runs.submit(PROMPT)
        workers.start("w1", ASK="1", LISTEN="0")
        workers.wait(
            lambda: any(e["type"] == "tool_approval_request" for e in runs.events(run_id)),
            60,
            "the approval request in the journal",
        )
        runs.approve(run_id, "c1", "allow" if allow else "deny")
        assert _settle(workers, runs, run_id)["reason"] == "stop"
    tools = (workers.directory / "tools.log").read_text()
    assert ("c1 append done" in tools) is allow
