"""No pickle: rows a worker reads are JSON; a pickled row is refused, never unpickled.

A process that can write to the runs' database (but is not mainspring: plain DBOS, whose
default encoding is pickle) enqueues a run whose input is a pickle, and sends a pickled
message to a run waiting for an approval. Unpickling either would create a directory;
it never appears, the waiting call is blocked, and the worker goes on with other runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from mainspring.durable import RefusedRow, Runs
from mainspring.durable.config import APP_VERSION, DEFAULT_QUEUE, WORKFLOW_NAME
from mainspring.durable.serialization import JSON_ROWS

WRITER = """
import os, sys
from dbos import DBOSClient

class Payload:
    def __reduce__(self):
        return (os.mkdir, (sys.argv[2],))

client = DBOSClient(system_database_url=sys.argv[1], application_name="mainspring")
client.enqueue({"workflow_name": sys.argv[4], "queue_name": sys.argv[5],
                "workflow_id": "pickled", "app_version": sys.argv[6]}, Payload())
client.send(sys.argv[3], Payload(), "mainspring.approval")
client.destroy()
"""


def _asked(runs: Runs, run_id: str) -> bool:
    return any(e["type"] == "tool_approval_request" for e in runs.events(run_id))


def test_pickled_rows_are_refused_never_unpickled(workers: Any, tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    with Runs(workers.url) as runs:
        waiting = runs.submit("Do the three steps.")
        workers.start("w1", ASK="1")
        workers.wait(lambda: _asked(runs, waiting), 60, "the approval request")
        written = subprocess.run(
            [
                sys.executable,
                "-c",
                WRITER,
                workers.url,
                str(marker),
                waiting,
                WORKFLOW_NAME,
                DEFAULT_QUEUE,
                APP_VERSION,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert written.returncode == 0, written.stderr
        # the call waiting for a decision met the pickled message: it is blocked
        outcome = runs.result(waiting, timeout_s=120)
        assert outcome["reason"] == "stop", outcome
        decisions = [e for e in runs.events(waiting) if e["type"] == "tool_decision"]
        assert [e["decision"] for e in decisions if e["tool_call_id"] == "c1"] == ["block"]
        # a run submitted after the pickled one is run
        later = runs.submit("Do the three steps.", options={})
        workers.wait(lambda: _asked(runs, later), 60, "the later run")
        assert runs.get("pickled").status != "SUCCESS"
    assert not marker.exists()
    assert "refused" in workers.logs()


def test_a_pickled_value_is_refused_by_every_reader() -> None:
    from dbos._serialization import deserialize_value

    with pytest.raises(RefusedRow, match="pickled"):
        deserialize_value("gASVAAAAAAAAAAA=", "py_pickle", JSON_ROWS)
    with pytest.raises(RefusedRow, match="not JSON"):
        deserialize_value("gASVAAAAAAAAAAA=", None, JSON_ROWS)


def test_what_mainspring_writes_is_json(workers: Any) -> None:
    with Runs(workers.url) as runs:
        run_id = runs.submit("Do the three steps.")
        workers.start("w1")
        runs.result(run_id, timeout_s=120)
    engine = sa.create_engine(workers.url.replace("postgresql://", "postgresql+psycopg://"))
    prefix = "" if workers.url.startswith("sqlite") else "dbos."
    with engine.connect() as connection:
        encodings = set()
        for table in ("workflow_status", "operation_outputs", "notifications"):
            rows = connection.execute(sa.text(f"SELECT serialization FROM {prefix}{table}"))
            encodings |= {row[0] for row in rows}
    engine.dispose()
    assert encodings <= {"portable_json", None}
    assert "portable_json" in encodings
