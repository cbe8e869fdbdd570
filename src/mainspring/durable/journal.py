"""The event journal: every event of a durable run, by ``seq``, in the run's database.

A durable run journals each event *before* its listeners and ``on_event`` observers see
it, so an event anyone saw is journaled. After a crash the new worker replays the run
from its checkpoints; events up to the last journaled ``seq`` are neither journaled nor
delivered again (:class:`mainspring.RunOptions`), and numbering goes on
from there. Any process can read a run's events (a UI, ``mainspring runs show --events``)
with :meth:`Journal.read_events`; rows are keyed ``(run_id, seq)``, so a reader that
remembers the last ``seq`` it saw never sees an event twice.

A transcript message is stored once by an execution: in the first row that carries it
(its ``message_start`` or ``message_end``); a later row that carries it (``message_end``,
``turn_end``, ``agent_end``) holds the ``seq`` of that row instead (:func:`journal_row`),
and :meth:`Journal.read_events` puts the message back, so readers get each event as its
listeners got it. Rows with every message in full read the same.

A run's events are written in batches (:class:`RunJournal`), one transaction each, in
``seq`` order: an event is written at the latest before anyone but the journal sees it,
before the run runs a tool or waits for an approval, when the run ends, and within
:data:`FLUSH_INTERVAL_S` of being emitted. The
batch written as a tool call starts also marks the call's step started (the table
``mainspring_call_starts``): after a crash, a call whose step was marked by an earlier
execution and has no checkpoint was in flight when the process died.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeGuard

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from ..events import event_to_dict
from ..message_json import encode_message
from ..providers.base import TextDelta
from .config import is_sqlite
from .steps import delta_to_dict

__all__ = ["FLUSH_INTERVAL_S", "Journal", "RunJournal"]

_METADATA = sa.MetaData()
_EVENTS = sa.Table(
    "mainspring_run_events",
    _METADATA,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
)
_CALL_STARTS = sa.Table(
    "mainspring_call_starts",
    _METADATA,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("step_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("execution", sa.String(32), nullable=False),
)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    """No sync per commit (the file is in WAL mode, set when it was made): a crash of the
    process loses nothing (the OS has the pages); a power cut may lose the last events,
    which are then delivered again."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


_PER_STATEMENT = 500
"""Rows per ``INSERT`` statement of a batch, and per ``IN`` list of a read (well under
the databases' bound on parameters)."""

FLUSH_INTERVAL_S = 0.05
"""The longest an event waits to be written while nothing else writes it (seconds): how
far behind the run a reader of the journal may be."""

RETRY_WINDOW_S = float(os.environ.get("MAINSPRING_DATABASE_RETRY_S", "60"))
"""How long a journal write is retried while the database is unreachable (seconds;
``MAINSPRING_DATABASE_RETRY_S``)."""


def _retrying(write: Callable[[], Any], window_s: float) -> Any:
    """``write()``; on a lost connection (``OperationalError``, ``InterfaceError``) retry
    with a growing pause, up to ``window_s`` seconds, then raise the last error."""
    deadline = time.monotonic() + window_s
    pause = 0.05
    while True:
        try:
            return write()
        except (sa.exc.OperationalError, sa.exc.InterfaceError):
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)  # in a worker thread: the run waits, the loop does not
            pause = min(pause * 2, 2.0)


_ENTRIES = frozenset({"message", "messages", "tool_results"})
"""The event fields that hold transcript entries (one, or a tuple)."""

Stored = dict[int, tuple[Any, int]]
"""What one execution of a run journaled in full: ``id(message)`` -> the message (held, so
its id is not reused) and the ``seq`` of the row whose ``message`` field holds it."""


def _entry(message: Any, stored: Stored) -> Any:
    """``message`` as a journal row holds it: the ``seq`` of the row that holds it in full
    if there is one, else its encoding."""
    held = stored.get(id(message))
    if held is not None and held[0] is message:
        return held[1]
    return encode_message(message)


def _event_json(event: Any, stored: Stored) -> dict[str, Any]:
    """``event`` as JSON data, its transcript entries in the form session files keep
    (:func:`~mainspring.message_json.encode_message`), or as the ``seq`` of the row that
    holds them in full (see :func:`journal_row`)."""
    names = [item.name for item in dataclasses.fields(event)]
    if _ENTRIES.isdisjoint(names):
        return event_to_dict(event)
    data: dict[str, Any] = {"type": event.type}
    whole: dict[str, Any] | None = None
    for name in names:
        value = getattr(event, name)
        if value is None or type(value) in (str, int, float, bool):
            data[name] = value
        elif name in _ENTRIES:
            many = isinstance(value, tuple | list)
            data[name] = [_entry(m, stored) for m in value] if many else _entry(value, stored)
        else:
            whole = whole or event_to_dict(event)
            data[name] = whole[name]
    if isinstance(data.get("message"), dict):
        stored[id(event.message)] = (event.message, event.seq)
    return data


def journal_row(event: Any, stored: Stored | None = None) -> dict[str, Any]:
    """The journal row of ``event``: its body is a ``message_update`` as ``[turn, delta]``
    (a text delta as its text alone), any other event whole, except that a transcript
    entry already held in full by a row of ``stored`` (an earlier row of the same
    execution, written before this one) is the ``seq`` of that row; ``stored`` learns the
    message this row holds in full. Readers put the message back (:meth:`Journal.read_events`)."""
    if event.type == "message_update":
        delta = event.delta
        kept = delta.text if isinstance(delta, TextDelta) else delta_to_dict(delta)
        body = json.dumps([event.turn, kept], ensure_ascii=False, separators=(",", ":"))
    else:
        data = _event_json(event, {} if stored is None else stored)
        body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return {"run_id": event.run_id, "seq": event.seq, "type": event.type, "body": body}


def _event(run_id: str, seq: int, kind: str, body: str) -> dict[str, Any]:
    """The JSON dict of a journal row (a ``message_update`` without its partial message;
    entries held by reference still references)."""
    data = json.loads(body)
    if kind != "message_update":
        if not isinstance(data, dict):
            raise ValueError(
                f"journal row {seq} of run {run_id} is not an event; the journal was changed "
                "outside mainspring"
            )
        data["seq"] = seq  # the row's key: a reader resumes after it
        return data
    turn, kept = data
    delta = {"type": "text_delta", "text": kept} if isinstance(kept, str) else kept
    return {"type": kind, "seq": seq, "run_id": run_id, "turn": turn, "delta": delta}


def _is_reference(value: Any) -> TypeGuard[int]:
    """Whether a transcript entry of a row is a reference (a ``seq``), not a message."""
    return isinstance(value, int) and not isinstance(value, bool)


def _references(event: dict[str, Any]) -> set[int]:
    """The ``seq`` of every row ``event``'s transcript entries are held by."""
    found: set[int] = set()
    for name in _ENTRIES:
        value = event.get(name)
        for item in value if isinstance(value, list) else (value,):
            if _is_reference(item):
                found.add(item)
    return found


def _resolve(run_id: str, event: dict[str, Any], held: dict[int, Any]) -> None:
    """Put back, in place, the entries ``event`` holds by reference (``held``: ``seq`` ->
    the ``message`` of that row, itself possibly a reference to an earlier row: rows two
    executions of a run both wrote keep the first writer's); ``ValueError`` for a
    reference to a row that holds no message."""

    def entry(item: Any) -> Any:
        value, hops = item, 0
        while _is_reference(value):
            found = held.get(value)
            hops += 1
            if found is None or hops > len(held):
                raise ValueError(
                    f"journal row {event.get('seq')} of run {run_id} refers to row {item}, "
                    "which holds no message; the journal was changed outside mainspring"
                )
            value = found
        return copy.deepcopy(value)  # each event its own dicts, as when written in full

    for name in _ENTRIES:
        value = event.get(name)
        if isinstance(value, list):
            event[name] = [entry(item) for item in value]
        elif value is not None:
            event[name] = entry(value)


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
        self._insert = sqlite_insert if self.sqlite else postgresql_insert
        try:
            with self.engine.begin() as connection:
                if self.sqlite:
                    # the write lock first (waiting out another process's, within the
                    # busy timeout): a check that reads, then a creation that writes,
                    # would fail at once with "database is locked" if another process
                    # wrote in between (a worker and a submit starting together)
                    connection.exec_driver_sql("BEGIN IMMEDIATE")
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

    def progress(self, run_id: str) -> tuple[int, str | None]:
        """How far a run got, read without its journal: the turns ended so far, and the
        ``error`` of its newest ``hook_error`` or ``retry`` (``None`` when there is none).
        Two queries on the run's rows; no event body but that one is read."""
        turns = sa.select(sa.func.count()).where(
            _EVENTS.c.run_id == run_id, _EVENTS.c.type == "turn_end"
        )
        newest = (
            sa.select(_EVENTS.c.seq, _EVENTS.c.type, _EVENTS.c.body)
            .where(_EVENTS.c.run_id == run_id, _EVENTS.c.type.in_(("hook_error", "retry")))
            .order_by(_EVENTS.c.seq.desc())
            .limit(1)
        )
        with self.engine.connect() as connection:
            count = int(connection.execute(turns).scalar() or 0)
            row = connection.execute(newest).first()
        if row is None:
            return count, None
        return count, str(_event(run_id, row.seq, row.type, row.body).get("error"))

    def write(
        self,
        run_id: str,
        rows: list[dict[str, Any]],
        started_step: int | None = None,
        execution: str = "",
    ) -> bool:
        """Write ``rows`` (from :func:`journal_row`) in one transaction, a row already
        journaled under its ``seq`` kept; with ``started_step``, mark that step of the
        run started by ``execution`` in the same transaction. Whether another execution
        marked it before (always ``False`` without ``started_step``). Blocking: retried
        while the database is unreachable (see :data:`RETRY_WINDOW_S`)."""

        insert = self._insert
        # one statement per batch (a round trip each on PostgreSQL), a row already there kept
        statements = [
            insert(_EVENTS).values(rows[start : start + _PER_STATEMENT]).on_conflict_do_nothing()
            for start in range(0, len(rows), _PER_STATEMENT)
        ]
        mark = None
        if started_step is not None:
            # inserted, or left as it was: either way it says which execution marked it
            mark = (
                insert(_CALL_STARTS)
                .values(run_id=run_id, step_id=started_step, execution=execution)
                .on_conflict_do_update(
                    index_elements=[_CALL_STARTS.c.run_id, _CALL_STARTS.c.step_id],
                    set_={"execution": _CALL_STARTS.c.execution},
                )
                .returning(_CALL_STARTS.c.execution)
            )

        def write() -> bool:
            with self._lock, self.engine.begin() as connection:
                for statement in statements:
                    connection.execute(statement)
                if mark is None:
                    return False
                # a write retried after its commit was lost finds its own mark
                return bool(connection.execute(mark).scalar_one() != execution)

        result: bool = _retrying(write, self.retry_window_s)
        return result

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
        """The run's journaled events with ``seq > after_seq`` (at most ``limit``), in
        order, as JSON dicts: each as its listeners got it, a message a row holds by
        reference put back from the row that holds it (read too if it is not among them).
        ``ValueError`` for a reference to a row that holds no message."""
        query = (
            sa.select(_EVENTS.c.seq, _EVENTS.c.type, _EVENTS.c.body)
            .where(_EVENTS.c.run_id == run_id, _EVENTS.c.seq > after_seq)
            .order_by(_EVENTS.c.seq)
        )
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as connection:
            rows = connection.execute(query).all()
            events = [_event(run_id, seq, kind, body) for seq, kind, body in rows]
            held = {
                seq: event["message"]
                for (seq, _kind, _body), event in zip(rows, events, strict=True)
                if "message" in event
            }
            wanted = set().union(*map(_references, events))
            asked: set[int] = set()  # a row not found is not asked for again
            while missing := sorted(wanted.difference(held, asked)):
                asked.update(missing)
                for start in range(0, len(missing), _PER_STATEMENT):
                    chunk = missing[start : start + _PER_STATEMENT]
                    found = sa.select(_EVENTS.c.seq, _EVENTS.c.type, _EVENTS.c.body).where(
                        _EVENTS.c.run_id == run_id, _EVENTS.c.seq.in_(chunk)
                    )
                    for seq, kind, body in connection.execute(found):
                        message = _event(run_id, seq, kind, body).get("message")
                        if message is not None:
                            held[seq] = message
                wanted = {m for m in held.values() if _is_reference(m)}
        for event in events:
            if _references(event):
                _resolve(run_id, event, held)
        return events


class RunJournal:
    """The journal of one execution of one run: events are recorded as they are emitted
    and written in batches (see the module), each batch in ``seq`` order after the one
    before it.

    ``fail`` hears a write that failed in the background (after its retries); the run
    stops. After any failed write nothing more is written by this execution (a later
    batch would leave a gap in ``seq``): :meth:`flush` raises again.
    """

    def __init__(
        self,
        journal: Journal,
        run_id: str,
        fail: Callable[[BaseException], None],
        interval_s: float = FLUSH_INTERVAL_S,
    ) -> None:
        self.journal = journal
        self.run_id = run_id
        self.interval_s = interval_s
        self.execution = uuid.uuid4().hex
        self._fail = fail
        self._pending: list[dict[str, Any]] = []
        self._stored: Stored = {}
        self._writing = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._background: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._writing_now: asyncio.Future[bool] | None = None

    def record(self, event: Any) -> None:
        """Add ``event`` to the next batch (written within :attr:`interval_s`)."""
        self._pending.append(journal_row(event, self._stored))
        if self._timer is None and self._failure is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.interval_s, self._flush_in_background)

    async def flush(self, started_step: int | None = None) -> bool:
        """Write every event recorded so far; with ``started_step``, mark that step started
        in the same transaction and return whether an earlier execution had marked it."""
        async with self._writing:
            await self._settle()
            rows, self._pending = self._pending, []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not rows and started_step is None:
                return False
            self._writing_now = asyncio.ensure_future(
                asyncio.to_thread(
                    self.journal.write, self.run_id, rows, started_step, self.execution
                )
            )
            return await self._settle()  # cut while waiting: the next flush waits for it

    async def _settle(self) -> bool:
        """Wait for the write in progress (one whose waiter was cut, or this flush's own);
        raise if it, or any write before it, failed."""
        write, self._writing_now = self._writing_now, None
        if write is not None:
            try:
                await asyncio.wait({write})
            except BaseException:
                self._writing_now = write  # cut while waiting: still in progress
                raise
            error = (
                RuntimeError("a journal write was cancelled")
                if write.cancelled()
                else write.exception()
            )
            if error is not None and self._failure is None:
                self._failure = error
        if self._failure is not None:
            raise self._failure
        return write is not None and write.result()

    def _flush_in_background(self) -> None:
        self._timer = None
        if self._background is None or self._background.done():
            self._background = asyncio.ensure_future(self._background_flush())
        else:  # the last one is still writing: try again later
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.interval_s, self._flush_in_background)

    async def _background_flush(self) -> None:
        try:
            await self.flush()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._fail(error)

    async def close(self) -> None:
        """Stop writing in the background (what is recorded and unwritten is dropped:
        nobody saw it, and a replay delivers it again)."""
        self._stored.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for running in (self._background, self._writing_now):
            if running is not None and not running.done():
                await asyncio.wait({running})
        self._pending.clear()
