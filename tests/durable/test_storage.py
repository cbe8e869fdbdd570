"""What the runs' database holds: final (redacted) tool results only, in private files.

A redactor rewrites every tool result; the worker is killed between turns and another
finishes the run from its checkpoints. The raw results appear nowhere in the database
(the checkpoints keep the result the model saw, after the redactors), the replayed run
has the redacted results, and the SQLite files are 0600 even in an existing directory
with a URL given explicitly.
"""

from __future__ import annotations

import base64
import binascii
import re
import stat
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from mainspring.durable import Runs

RAW = b" ok: step"


def _database_bytes(url: str) -> bytes:
    """Everything stored, with base64 runs decoded too (a pickle is stored in base64)."""
    stored = _stored(url)
    decoded = []
    for chunk in re.findall(rb"[A-Za-z0-9+/]{40,}={0,2}", stored):
        try:
            decoded.append(base64.b64decode(chunk + b"=" * (-len(chunk) % 4)))
        except (binascii.Error, ValueError):
            continue
    return stored + b"".join(decoded)


def _stored(url: str) -> bytes:
    if url.startswith("sqlite"):
        path = Path(url.split("///", 1)[1])
        return b"".join(
            p.read_bytes() for p in path.parent.glob(path.name + "*") if not p.name.endswith("lock")
        )
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    found = []
    with engine.connect() as connection:
        tables = connection.execute(
            sa.text(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_schema IN ('dbos', 'public')"
            )
        ).all()
        for schema, table in tables:
            rows = connection.execute(sa.text(f'SELECT * FROM "{schema}"."{table}"')).all()
            found.append(repr(rows).encode())
    engine.dispose()
    return b"".join(found)


def test_checkpoints_keep_the_redacted_result_never_the_raw_one(workers: Any) -> None:
    directory = workers.directory
    with Runs(workers.url) as runs:
        run_id = runs.submit("Do the three steps.")
        first = workers.start("w1", "at:turn_end:1", REDACT="1")
        workers.wait(lambda: (directory / "crashed").exists(), 60, "the worker at turn 1")
        workers.kill(first)
        workers.start("w1", REDACT="1")
        outcome = runs.result(run_id, timeout_s=120)
        assert outcome["reason"] == "stop"
        events = runs.events(run_id)
    ends = [e for e in events if e["type"] == "tool_execution_end"]
    texts = [e["result"]["content"][0]["text"] for e in ends]
    assert all("[REDACTED]" in t for t in texts) and len(texts) == 3
    results = [m for m in outcome["messages"] if m["role"] == "tool_result"]
    assert all("[REDACTED]" in m["content"][0]["text"] for m in results), results
    # the tools really ran once each and said " ok: "; no copy of that is stored
    assert len((directory / "tools.log").read_text().splitlines()) == 6
    assert RAW not in _database_bytes(workers.url)
    if workers.url.startswith("sqlite"):
        path = Path(workers.url.split("///", 1)[1])
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.glob(path.name + "*")}
        assert set(modes.values()) == {0o600}, modes


def test_the_journal_of_a_reply_is_at_most_three_times_its_size(workers: Any) -> None:
    with Runs(workers.url) as runs:
        run_id = runs.submit("Long reply, please.")
        workers.start("w1")
        assert runs.result(run_id, timeout_s=120)["reason"] == "stop"
        updates = [e for e in runs.events(run_id) if e["type"] == "message_update"]
        streamed = runs.journal.row_bytes(run_id, ("message_update", "message_end"))
        stored = runs.journal.row_bytes(run_id)
    reply = "".join(e["delta"].get("text", "") for e in updates)
    assert reply == "z" * 8000
    assert len(updates) >= 1000  # the faux model streams 8 characters a delta
    # the deltas and the whole message once; turn_end and agent_end refer to its row
    assert streamed <= 3 * len(reply), streamed
    assert stored <= 3 * len(reply), stored
