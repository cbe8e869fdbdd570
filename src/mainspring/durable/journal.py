"""The event journal: every event of a durable run, by ``seq``, in the run's database.

A durable run writes each event here *before* its listeners and ``on_event`` observers
see it, so an event anyone saw is journaled. After a crash the new worker replays the run
from its checkpoints; events up to the last journaled ``seq`` are neither journaled nor
delivered again (:class:`mainspring.RunOptions`), and numbering goes on
from there. Any process can read a run's events (a UI, ``mainspring runs show --events``)
with :func:`read_events`; rows are keyed ``(run_id, seq)``, so a reader that remembers the
last ``seq`` it saw never sees an event twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from ..events import event_to_dict
from ..providers.base import TextDelta
from .config import is_sqlite
from .steps import delta_to_dict

__all__ = ["Journal"]

_METADATA = sa.MetaData()
_EVENTS = sa.Table(
    "mainspring_run_events",
    _METADATA,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    """No sync per commit (the file is in WAL mode, set when it was made): a crash of the
    process loses nothing (the OS has the pages); a power cut may lose the last events,
    which are then delivered again."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


RETRY_WINDOW_S = float(os.environ.get("MAINSPRING_DATABASE_RETRY_S", "60"))
"""How long a journal write is retried while the database is unreachable (seconds;
``MAINSPRING_DATABASE_RETRY_S``)."""


def _retrying(write: Any, window_s: float) -> None:
    """Run ``write()``; on a lost connection (``OperationalError``, ``InterfaceError``)
    retry with a growing pause, up to ``window_s`` seconds, then raise the last error."""
    deadline = time.monotonic() + window_s
    pause = 0.05
    while True:
        try:
            write()
            return
        except (sa.exc.OperationalError, sa.exc.InterfaceError):
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)  # in a worker thread: the run waits, the loop does not
            pause = min(pause * 2, 2.0)


def _body(event: Any) -> str:
    """The journal row's body of ``event``: a ``message_update`` as ``[turn, delta]``
    (a text delta as its text alone), any other event whole."""
    if event.type == "message_update":
        delta = event.delta
        kept = delta.text if isinstance(delta, TextDelta) else delta_to_dict(delta)
        return json.dumps([event.turn, kept], ensure_ascii=False, separators=(",", ":"))
    data = event_to_dict(event)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _event(run_id: str, seq: int, kind: str, body: str) -> dict[str, Any]:
    """The JSON dict of a journal row (a ``message_update`` without its partial message)."""
    data = json.loads(body)
    if kind != "message_update":
        return cast(dict[str, Any], data)
    turn, kept = data
    delta = {"type": "text_delta", "text": kept} if isinstance(kept, str) else kept
    return {"type": kind, "seq": seq, "run_id": run_id, "turn": turn, "delta": delta}


class Journal:
    """The event table of one database (created on first use)."""

    def __init__(self, url: str, retry_window_s: float = RETRY_WINDOW_S) -> None:
        self.retry_window_s = retry_window_s
        self.sqlite = is_sqlite(url)
        if self.sqlite:
            self.engine = sa.create_engine(url, connect_args={"timeout": 60})
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        else:
            self.engine = sa.create_engine(
                url.replace("postgresql://", "postgresql+psycopg://", 1),
                pool_size=4,
                pool_recycle=300,
                pool_pre_ping=True,  # a connection lost with a database restart is replaced
            )
        self._lock = threading.Lock()
        try:
            with self.engine.begin() as connection:
                _METADATA.create_all(connection, checkfirst=True)
        except sa.exc.DBAPIError:
            # another process created the table between the check and the creation
            with self.engine.begin() as connection:
                _METADATA.create_all(connection, checkfirst=True)

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()

    def last_seq(self, run_id: str) -> int:
        """The ``seq`` of the run's last journaled event (0 when none)."""
        query = sa.select(sa.func.max(_EVENTS.c.seq)).where(_EVENTS.c.run_id == run_id)
        with self.engine.connect() as connection:
            value = connection.execute(query).scalar()
        return int(value or 0)

    def append(self, event: Any) -> None:
        """Journal one event (an event already journaled under its ``seq`` is kept)."""
        row = {
            "run_id": event.run_id,
            "seq": event.seq,
            "type": event.type,
            "body": _body(event),
        }
        statement = (sqlite_insert if self.sqlite else postgresql_insert)(_EVENTS)
        insert = statement.values(**row).on_conflict_do_nothing()

        def write() -> None:
            with self._lock, self.engine.begin() as connection:
                connection.execute(insert)

        _retrying(write, self.retry_window_s)

    async def append_async(self, event: Any) -> None:
        """:meth:`append` off the event loop."""
        await asyncio.to_thread(self.append, event)

    def row_bytes(self, run_id: str, types: tuple[str, ...] | None = None) -> int:
        """The bytes of the run's journal rows (their bodies), of ``types`` only if given."""
        query = sa.select(sa.func.sum(sa.func.length(_EVENTS.c.body))).where(
            _EVENTS.c.run_id == run_id
        )
        if types is not None:
            query = query.where(_EVENTS.c.type.in_(types))
        with self.engine.connect() as connection:
            return int(connection.execute(query).scalar() or 0)

    def read_events(self, run_id: str, after_seq: int = 0, limit: int | None = None) -> list[Any]:
        """The run's journaled events with ``seq > after_seq``, in order, as JSON dicts."""
        query = (
            sa.select(_EVENTS.c.seq, _EVENTS.c.type, _EVENTS.c.body)
            .where(_EVENTS.c.run_id == run_id, _EVENTS.c.seq > after_seq)
            .order_by(_EVENTS.c.seq)
        )
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as connection:
            rows = connection.execute(query).all()
        return [_event(run_id, seq, kind, body) for seq, kind, body in rows]
