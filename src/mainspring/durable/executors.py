"""Executor ids: each live worker of a database holds its own, and a restart takes it back.

DBOS recovers, when a worker launches, the runs that were in progress under the worker's
executor id. Two live workers with one id would each recover the other's runs and run
them twice at once; a worker restarted under a new id would leave its runs pending. So a
worker *leases* its id for as long as it lives:

- on PostgreSQL, a session advisory lock on a connection the worker keeps open (the
  server releases it when the process dies, whatever killed it);
- on SQLite, an exclusive ``flock`` on a file next to the database (mode 0600), which
  the kernel releases when the process dies.

Without a chosen id a worker takes the first free one of ``HOST-1``, ``HOST-2``, ...:
two workers started with no options never share one, and a worker restarted after a
crash takes back the id of the one that died (the lowest free), recovering its runs. A
chosen id that a live worker holds is refused with :class:`ExecutorInUse`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
from typing import Any

import sqlalchemy as sa

from .config import is_sqlite, sqlite_path

__all__ = ["ExecutorInUse", "ExecutorLease", "lease_executor_id"]

_MOST_DEFAULT_IDS = 1000


class ExecutorInUse(ValueError):
    """The executor id asked for is held by a live worker of the same database."""


class ExecutorLease:
    """A held executor id; :meth:`release` gives it back (dying does too)."""

    def __init__(self, executor_id: str, release: Any) -> None:
        self.executor_id = executor_id
        self._release = release

    def release(self) -> None:
        """Give the id back (idempotent)."""
        release, self._release = self._release, None
        if release is not None:
            with contextlib.suppress(Exception):
                release()


def _lock_key(executor_id: str) -> int:
    """The advisory lock of an executor id: a signed 64-bit number of its digest."""
    digest = hashlib.sha256(f"mainspring.executor:{executor_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class _PostgresLeases:
    def __init__(self, url: str) -> None:
        engine_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
        self.engine = sa.create_engine(engine_url, poolclass=sa.pool.NullPool)
        self.connection = self.engine.connect()

    def take(self, executor_id: str) -> bool:
        query = sa.text("SELECT pg_try_advisory_lock(:key)")
        taken = bool(self.connection.execute(query, {"key": _lock_key(executor_id)}).scalar())
        self.connection.commit()
        return taken

    def close(self) -> None:
        self.connection.close()
        self.engine.dispose()


class _FileLeases:
    def __init__(self, url: str) -> None:
        self.base = sqlite_path(url)
        self.held: int | None = None

    def take(self, executor_id: str) -> bool:
        name = hashlib.sha256(executor_id.encode()).hexdigest()[:16]
        path = f"{self.base}.executor-{name}.lock"
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return False
        self.held = descriptor
        return True

    def close(self) -> None:
        if self.held is not None:
            os.close(self.held)
            self.held = None


def lease_executor_id(url: str, executor_id: str | None = None) -> ExecutorLease:
    """Hold ``executor_id`` (or the first free ``HOST-N``) on the database ``url``.

    :class:`ExecutorInUse` when the chosen id is held by a live worker.
    """
    leases: _PostgresLeases | _FileLeases = (
        _FileLeases(url) if is_sqlite(url) else _PostgresLeases(url)
    )
    try:
        if executor_id is not None:
            if not leases.take(executor_id):
                raise ExecutorInUse(
                    f"executor id {executor_id!r} is held by a running worker of this "
                    "database; give another --id, or stop that worker first"
                )
            return ExecutorLease(executor_id, leases.close)
        host = socket.gethostname() or "worker"
        for index in range(1, _MOST_DEFAULT_IDS + 1):
            candidate = f"{host}-{index}"
            if leases.take(candidate):
                return ExecutorLease(candidate, leases.close)
        raise ExecutorInUse(f"{_MOST_DEFAULT_IDS} workers of this host hold an executor id")
    except BaseException:
        leases.close()
        raise
