"""Crash recovery: a worker killed with SIGKILL at each point; a restarted worker finishes.

For each database (SQLite, PostgreSQL) and each point (mid-stream, inside a tool,
between turns, inside a compaction) the run's final transcript, the tool executions and
the events a listener saw across both workers are compared with an uninterrupted run of
the same script.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mainspring import encode_message
from mainspring.durable import INTERRUPTED, Runs
from mainspring.testing import check_event_grammar

PROMPT = "Do the three steps."


def _plain(value: Any) -> Any:
    """A message as JSON without its timestamps (two runs never share those)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _transcript(runs: Runs, run_id: str) -> list[Any]:
    return [_plain(encode_message(m)) for m in runs.transcript(run_id)]


def _seen(directory: Path, processes: list[Any]) -> list[dict[str, Any]]:
    """The events the listeners of ``processes`` saw, in process order."""
    events: list[dict[str, Any]] = []
    for process in processes:
        path = directory / f"events-{process.pid}.jsonl"
        if path.exists():
            events.extend(json.loads(line) for line in path.read_text().splitlines())
    return events


def _tool_log(directory: Path) -> list[str]:
    path = directory / "tools.log"
    return [line.strip() for line in path.read_text().splitlines()] if path.exists() else []


def _run(workers: Any, crash: str) -> tuple[list[Any], list[dict[str, Any]], list[str]]:
    """Submit one run, crash the first worker at ``crash`` (if any), finish it."""
    directory = workers.directory
    with Runs(workers.url) as runs:
        run_id = runs.submit(PROMPT)
        first = workers.start("w1", crash)
        processes = [first]
        if crash:
            workers.wait(lambda: (directory / "crashed").exists(), 60, f"worker at {crash}")
            workers.kill(first)
            assert runs.get(run_id).status == "PENDING"
            processes.append(workers.start("w1"))
        try:
            outcome = runs.result(run_id, timeout_s=120)
        except TimeoutError:
            raise AssertionError(workers.logs()) from None
        assert outcome["reason"] == "stop", outcome
        assert runs.get(run_id).status == "SUCCESS"
        events = runs.events(run_id)
        transcript = _transcript(runs, run_id)
    seen = _seen(directory, processes)
    # the journal holds every event once, in order, and is what the listeners saw
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [(e["seq"], e["type"]) for e in seen] == [(e["seq"], e["type"]) for e in events]
    # a message replayed from checkpoints is assembled again, with a new timestamp
    check_event_grammar([_plain(e) for e in seen])
    return transcript, seen, _tool_log(directory)


@pytest.fixture
def baseline(workers: Any) -> tuple[list[Any], list[dict[str, Any]], list[str]]:
    """The uninterrupted run (then the directory is cleared for the crashed one)."""
    result = _run(workers, "")
    workers.stop_all()
    for path in workers.directory.glob("*"):
        if path.suffix in (".jsonl", ".log") or path.name.startswith("ready"):
            path.rename(path.with_name("baseline-" + path.name))
    return result


def _shape(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(e["seq"], e["type"]) for e in events]


@pytest.mark.parametrize("crash", ["stream", "tool", "between", "compaction"])
def test_a_killed_run_ends_as_an_uninterrupted_one(workers: Any, baseline: Any, crash: str) -> None:
    transcript, events, tools = baseline
    assert tools == [
        "c0 note start",
        "c0 note done",
        "c1 append start",
        "c1 append done",
        "c2 note start",
        "c2 note done",
    ]
    assert any(e["type"] == "compaction_end" for e in events)

    crashed_transcript, seen, crashed_tools = _run(workers, crash)

    assert crashed_transcript == transcript
    assert _shape(seen) == _shape(events)
    # a checkpointed call never runs again; the idempotent call in flight ran again
    for line in tools:
        expected = 2 if crash == "tool" and line == "c2 note start" else 1
        assert crashed_tools.count(line) == expected, crashed_tools


def test_a_call_in_flight_of_a_tool_not_idempotent_is_not_run_again(
    workers: Any, baseline: Any
) -> None:
    transcript, events, _ = baseline

    crashed_transcript, seen, tools = _run(workers, "tool_once")

    assert tools.count("c1 append start") == 1
    assert "c1 append done" not in tools
    results = [m for m in crashed_transcript if m["role"] == "tool_result"]
    interrupted = [r for r in results if r["tool_call_id"] == "c1"]
    assert [r["is_error"] for r in interrupted] == [True]
    assert interrupted[0]["content"][0]["text"] == INTERRUPTED.format(name="append")

    # everything else is as in the uninterrupted run (but the token counts of the
    # requests that carried the other result)
    def unpriced(message: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in message.items() if k != "usage"}

    pairs = zip(crashed_transcript, transcript, strict=True)
    different = [a for a, b in pairs if unpriced(a) != unpriced(b)]
    assert different == interrupted
    # the same events, less the progress report the interrupted call never sent
    updates = [e for e in events if e["type"] == "tool_execution_update"]
    assert len(seen) == len(events) - sum(1 for e in updates if e["tool_call_id"] == "c1")
