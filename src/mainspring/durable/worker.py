"""A worker: a process that runs durable runs from a DBOS queue.

Each worker launches DBOS on the runs' database, listens on one queue and runs at most
``concurrency`` runs at once (``global_concurrency`` bounds the queue across every
worker). At launch, DBOS recovers the runs that were in progress under the worker's
``executor_id``: restart a dead worker with the same id (as a service manager does) and
its runs continue where their checkpoints left them. While it serves, a worker refreshes
its heartbeat row (:mod:`mainspring.durable.heartbeats`). A worker leases its executor id for
as long as it lives (:mod:`mainspring.durable.executors`): without one chosen it takes the
first free ``HOST-N``, so two workers never share one and a restarted worker takes back
the id of the one that died; a chosen id held by a live worker is refused.
"""

from __future__ import annotations

import contextlib
import signal as signals
import threading
from collections.abc import Callable
from typing import Any

from dbos import DBOS

from ..agent import Agent
from .config import (
    DEFAULT_QUEUE,
    check_database,
    database_url,
    dbos_config,
    is_sqlite,
    secure_sqlite_file,
)
from .credentials import load_approval_key
from .executors import ExecutorLease, lease_executor_id
from .heartbeats import Heartbeat
from .journal import Journal
from .workflow import RUNTIME, AgentFactory, default_factory

__all__ = ["run_worker", "start_worker", "stop_worker"]

_QUEUE_POLL_S = 0.1
_LEASE: list[ExecutorLease] = []  # the executor id this process's worker holds
_HEARTBEAT: list[Heartbeat] = []  # its row in mainspring_workers


def start_worker(
    url: str | None = None,
    *,
    queue: str = DEFAULT_QUEUE,
    concurrency: int = 4,
    global_concurrency: int | None = None,
    executor_id: str | None = None,
    factory: AgentFactory | None = None,
    listen: Callable[[Agent, str], None] | None = None,
    create_database: bool = False,
    report: Callable[[str], None] | None = None,
) -> str:
    """Launch DBOS in this process as a worker of ``queue`` (returns once it runs).

    ``factory`` builds each run's agent (the default: installed plugins, settings, the
    run's model); ``listen(agent, run_id)`` may subscribe listeners to each run;
    ``report`` is told a line as each run starts and settles. A PostgreSQL database
    that does not exist is a ``ValueError`` unless ``create_database``. Returns the
    executor id. One worker per process; :func:`stop_worker` shuts it down.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    resolved = database_url(url)
    if is_sqlite(resolved):
        secure_sqlite_file(resolved)
    check_database(resolved, create=create_database)
    approval_key = load_approval_key(resolved, create=True)
    lease = lease_executor_id(resolved, executor_id)
    try:
        RUNTIME.approval_key = approval_key
        RUNTIME.journal = Journal(resolved)
        RUNTIME.factory = factory or default_factory
        RUNTIME.listen = listen
        RUNTIME.report = report
        DBOS(config=dbos_config(resolved, lease.executor_id))  # type: ignore[arg-type]
        DBOS.launch()
        DBOS.register_queue(
            queue,
            worker_concurrency=concurrency,
            global_concurrency=global_concurrency,
            polling_interval_sec=_QUEUE_POLL_S,
        )
        _HEARTBEAT.append(Heartbeat(RUNTIME.journal.engine, lease.executor_id, queue))
    except BaseException:
        lease.release()
        raise
    _LEASE.append(lease)
    return lease.executor_id


def stop_worker() -> None:
    """Shut the worker down: runs in progress stop where they are (they are recovered
    by the next worker with this executor id)."""
    while _HEARTBEAT:
        _HEARTBEAT.pop().stop()
    DBOS.destroy(destroy_registry=False)
    journal, RUNTIME.journal = RUNTIME.journal, None
    if journal is not None:
        journal.close()
    while _LEASE:
        _LEASE.pop().release()


def run_worker(
    stop: threading.Event | None = None,
    ready: Callable[[str], None] | None = None,
    **options: Any,
) -> None:
    """:func:`start_worker`, then serve until SIGTERM/SIGINT (or ``stop`` is set);
    ``ready`` is called with the executor id once the worker serves."""
    done = stop or threading.Event()
    executor_id = start_worker(**options)
    if ready is not None:
        ready(executor_id)
    previous = {}
    for number in (signals.SIGTERM, signals.SIGINT):
        with contextlib.suppress(ValueError):  # not the main thread
            previous[number] = signals.signal(number, lambda *_: done.set())
    try:
        done.wait()
    finally:
        for number, handler in previous.items():
            signals.signal(number, handler)
        stop_worker()
