"""A database that goes away for a while: the run waits and goes on, never fails for it.

PostgreSQL is stopped while a run's tool call is in flight; the call ends while the
database is down (its checkpoint and its journal rows cannot be written), and the
database comes back seconds later. The run settles normally, with a complete journal.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from mainspring.durable import Runs
from mainspring.testing import check_event_grammar


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
def test_a_run_outlives_a_database_outage(workers: Any, cluster: Any) -> None:
    directory = workers.directory
    with Runs(workers.url) as runs:
        run_id = runs.submit("Do the three steps.")
        os.mkfifo(directory / "go")
        workers.start("w1", HOLD="c2")
        tools = directory / "tools.log"
        workers.wait(lambda: tools.exists() and "c2 note start" in tools.read_text(), 60, "c2")
        cluster.pause()
        try:
            (directory / "go").write_text("go")  # the held call ends
            workers.wait(lambda: "c2 note done" in tools.read_text(), 60, "c2's end")
        finally:
            cluster.start()
        outcome = runs.result(run_id, timeout_s=120)
        assert outcome["reason"] == "stop", (outcome, workers.logs())
        events = runs.events(run_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "agent_end" and events[-1]["reason"] == "stop"
    check_event_grammar(
        [
            {**e, "message": {"role": "assistant"}} if e["type"] == "message_update" else e
            for e in events
        ]
    )
