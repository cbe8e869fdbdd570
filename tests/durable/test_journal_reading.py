"""Reading a run's journal: following it costs its length, and it reads back as delivered.

- ``Runs.follow`` of a run that waits for an approval (so it is followed over many polls)
  asks the database, at every read, only for the rows after the last ``seq`` it yielded:
  each row of the journal is fetched once, whatever the run's length.
- A message is journaled in full once, by the first row that carries it; the later
  carriers (``message_end`` of a message that started whole, ``turn_end``, ``agent_end``)
  hold the ``seq`` of that row, and every reader gets the events back exactly as the
  listeners got them. Rows written with every message in full (as journals before this
  form were) read the same, and a reference to a row that holds no message is refused.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import sqlalchemy as sa

import mainspring
from mainspring import Agent, Settings
from mainspring.durable import Runs, start_worker, stop_worker
from mainspring.durable.journal import journal_row
from mainspring.testing import FauxProvider, check_event_grammar, faux

PROMPT = "Do the three steps."


def _checkable(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Journaled events as the grammar checks them (a ``message_update`` keeps its delta,
    not the partial message)."""
    return [
        {**e, "message": {"role": "assistant"}} if e["type"] == "message_update" else e
        for e in events
    ]


POLLS = 3
"""Reads of the journal the follower makes while the run waits, before it is approved."""


def test_following_a_run_fetches_each_journal_row_once(workers: Any) -> None:
    workers.start("w1", ASK="1")  # the run waits for a decision on its call c1
    reads: list[tuple[int, int]] = []  # (after_seq asked for, last seq yielded by then)
    yielded = {"last": 0, "asked_at": -1}
    polled = threading.Event()
    progress: list[Any] = []

    def statement(_conn: Any, _cursor: Any, text: str, params: Any, *_: Any) -> None:
        if "mainspring_run_events.seq >" not in text:
            return
        values = params.values() if isinstance(params, dict) else params
        after = next(v for v in values if type(v) is int)
        reads.append((after, yielded["last"]))
        if yielded["asked_at"] >= 0 and len(reads) - yielded["asked_at"] >= POLLS:
            polled.set()

    def approve() -> None:
        assert polled.wait(120), "the follower did not poll while the run waited"
        with Runs(workers.url) as other:
            statements: list[str] = []
            sa.event.listen(
                other.journal.engine,
                "before_cursor_execute",
                lambda _conn, _cursor, text, *_: statements.append(text),
            )
            try:  # a running run: its progress without its journal (checked below)
                progress.append(other.get(run_id))
                progress.append([t for t in statements if "mainspring_run_events.seq >" in t])
            finally:
                other.approve(run_id, "c1", "allow")

    with Runs(workers.url) as runs:
        run_id = runs.submit(PROMPT)
        sa.event.listen(runs.journal.engine, "before_cursor_execute", statement)
        approver = threading.Thread(target=approve)
        approver.start()
        try:
            events = []
            for event in runs.follow(run_id):
                events.append(event)
                yielded["last"] = event["seq"]
                if event["type"] == "tool_approval_request":
                    yielded["asked_at"] = len(reads)
        finally:
            polled.set()
            approver.join()
        sa.event.remove(runs.journal.engine, "before_cursor_execute", statement)
        journaled = runs.events(run_id)
    assert events == journaled
    info, journal_reads = progress
    asked = next(e["seq"] for e in events if e["type"] == "tool_approval_request")
    ended = sum(1 for e in events if e["type"] == "turn_end" and e["seq"] < asked)
    assert (info.status, info.turns, info.last_error) == ("PENDING", ended, None), info
    assert journal_reads == []
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "agent_end" and events[-1]["reason"] == "stop"
    check_event_grammar(_checkable(events))
    assert len(reads) >= POLLS + 1
    # every read starts after the last row yielded: no row is fetched twice
    assert all(after == last for after, last in reads), reads


def _factory(spec: dict[str, Any]) -> Agent:
    def reply(request: Any) -> Any:
        if sum(1 for m in request.messages if getattr(m, "role", None) == "assistant"):
            return faux.reply(faux.text("z" * 8000))
        return faux.reply(faux.text("Noting."), faux.tool_call("note", {"text": "a"}, "c0"))

    async def note(args: Any, ctx: Any) -> str:
        return "noted " + args["text"]

    schema: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}}
    return Agent(
        model="faux:journal",
        provider=FauxProvider([reply] * 3, chunk_size=8),
        tools=[mainspring.Tool("note", "note", schema, note)],
        autoload=False,
        settings=Settings(),
    )


def _whole(event: Any) -> dict[str, Any]:
    """``event`` as a listener got it, every message in full (the journal's first form)."""
    if event.type == "message_update":
        return {"seq": event.seq, "type": event.type, "turn": event.turn}
    return dict(json.loads(journal_row(event)["body"]))


def test_messages_are_journaled_once_and_read_back_whole(database: str) -> None:
    delivered: list[Any] = []

    def listen(agent: Agent, run_id: str) -> None:
        agent.subscribe(lambda event, signal: delivered.append(event))

    start_worker(url=database, factory=_factory, listen=listen, executor_id="journal")
    try:
        with Runs(database) as runs:
            run_id = runs.submit("Note a, then say z.")
            assert runs.result(run_id, timeout_s=120)["reason"] == "stop"
            events = runs.events(run_id)
            carriers = runs.journal.row_bytes(run_id, ("turn_end", "agent_end"))
            # the rows as journals wrote them before, every message in full
            runs.journal.write("whole", [dict(journal_row(e), run_id="whole") for e in delivered])
            old = runs.events("whole")
            runs.journal.write(
                "broken",
                [{"run_id": "broken", "seq": 1, "type": "turn_end", "body": '{"message":7}'}],
            )
            with pytest.raises(ValueError, match="refers to row 7, which holds no message"):
                runs.events("broken")
    finally:
        stop_worker()
    expected = [_whole(e) for e in delivered]
    updates = ("seq", "type", "turn")
    read = [{k: e[k] for k in updates} if e["type"] == "message_update" else e for e in events]
    assert read == expected
    assert [{**e, "run_id": run_id} for e in old] == events
    check_event_grammar(_checkable(events))
    assert events[-1]["messages"][-1]["content"][0]["text"] == "z" * 8000
    # the reply is in its message_end; turn_end and agent_end hold references only
    assert carriers < 1000, carriers  # they held 16 KB, twice the reply
