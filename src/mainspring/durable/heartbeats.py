"""Worker heartbeats: which workers of a queue are alive, as seen from any process.

A worker refreshes its row in ``mainspring_workers`` (executor id, queue, host, pid, the
time) every :data:`HEARTBEAT_S` seconds from a thread of its own, and deletes it when it
stops. A worker whose row is older than :data:`STALE_S` is taken for dead (it was
killed, or lost its database). ``mainspring submit`` uses :func:`live_workers` to warn
when no worker of the queue has been seen: the run then waits until one starts.

Times are the writing machine's clock (seconds since the epoch): the machines of one
database must agree on the time to within a few seconds.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import sqlalchemy as sa

from ..logs import get_logger

__all__ = ["HEARTBEAT_S", "STALE_S", "Heartbeat", "live_workers"]

log = get_logger("mainspring.durable")

HEARTBEAT_S = float(os.environ.get("MAINSPRING_HEARTBEAT_S", "10"))
"""How often a worker refreshes its row (seconds; ``MAINSPRING_HEARTBEAT_S``)."""
STALE_S = float(os.environ.get("MAINSPRING_WORKER_STALE_S", "30"))
"""A worker not seen for this long is taken for dead (seconds;
``MAINSPRING_WORKER_STALE_S``)."""

_METADATA = sa.MetaData()
_WORKERS = sa.Table(
    "mainspring_workers",
    _METADATA,
    sa.Column("executor_id", sa.String(200), primary_key=True),
    sa.Column("queue", sa.String(200), nullable=False),
    sa.Column("host", sa.String(200), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("seen_at", sa.Float, nullable=False),
)


def _create(engine: sa.engine.Engine) -> None:
    try:
        _METADATA.create_all(engine, checkfirst=True)
    except sa.exc.DBAPIError:
        # another process created the table between the check and the creation
        _METADATA.create_all(engine, checkfirst=True)


class Heartbeat:
    """The row of one running worker, refreshed by a thread until :meth:`stop`."""

    def __init__(
        self,
        engine: sa.engine.Engine,
        executor_id: str,
        queue: str,
        interval_s: float = HEARTBEAT_S,
    ) -> None:
        self.engine = engine
        self.executor_id = executor_id
        self.queue = queue
        self.interval_s = interval_s
        self._stopped = threading.Event()
        self._failing = False
        _create(engine)
        self.beat()  # seen from the moment the worker serves
        self._thread = threading.Thread(
            target=self._run, name=f"mainspring-heartbeat-{executor_id}", daemon=True
        )
        self._thread.start()

    def beat(self) -> None:
        """Write the row with the current time (a failure is logged once, then retried)."""
        row = {
            "queue": self.queue,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "seen_at": time.time(),
        }
        key = _WORKERS.c.executor_id == self.executor_id
        try:
            with self.engine.begin() as connection:
                if not connection.execute(sa.update(_WORKERS).where(key).values(**row)).rowcount:
                    connection.execute(
                        sa.insert(_WORKERS).values(executor_id=self.executor_id, **row)
                    )
        except sa.exc.SQLAlchemyError as error:
            if not self._failing:
                log.warning("heartbeat_failed", executor_id=self.executor_id, error=str(error))
            self._failing = True
            return
        self._failing = False

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self.beat()

    def stop(self) -> None:
        """Stop beating and delete the row (the worker no longer serves)."""
        self._stopped.set()
        self._thread.join()
        try:
            with self.engine.begin() as connection:
                connection.execute(
                    sa.delete(_WORKERS).where(_WORKERS.c.executor_id == self.executor_id)
                )
        except sa.exc.SQLAlchemyError as error:  # the row goes stale on its own
            log.warning("heartbeat_failed", executor_id=self.executor_id, error=str(error))


def live_workers(engine: sa.engine.Engine, queue: str, stale_s: float = STALE_S) -> list[str]:
    """The executor ids of the workers of ``queue`` seen in the last ``stale_s`` seconds."""
    _create(engine)
    query = sa.select(_WORKERS.c.executor_id).where(
        _WORKERS.c.queue == queue, _WORKERS.c.seen_at >= time.time() - stale_s
    )
    with engine.connect() as connection:
        return sorted(str(executor) for executor in connection.execute(query).scalars())
