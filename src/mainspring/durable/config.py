"""Where durable runs are stored and how DBOS is configured for them.

The database is ``MAINSPRING_DATABASE_URL`` when set (``postgresql://...`` for many
processes and machines, ``sqlite:///path`` for one machine), else an SQLite file in the
user's data directory (``$MAINSPRING_DATA_DIR``, ``$XDG_DATA_HOME/mainspring``, else
``~/.local/share/mainspring``): ``durable.sqlite``.

Every process that runs, submits or inspects durable runs uses the same application name
and version, so a run enqueued by one process is executed, and recovered, by any worker:
DBOS only hands a workflow to an executor of the version that enqueued it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..data_directory import data_dir
from .serialization import JSON_ROWS

__all__ = [
    "APP_NAME",
    "APP_VERSION",
    "DEFAULT_QUEUE",
    "WORKFLOW_NAME",
    "check_database",
    "data_dir",
    "database_url",
    "dbos_config",
    "display_url",
    "is_sqlite",
    "secure_sqlite_file",
    "sqlite_path",
]

APP_NAME = "mainspring"
APP_VERSION = "mainspring-durable-2"
"""The version of the workflow's step sequence. Change it when a release changes which
steps a run takes, in which order: DBOS then leaves runs of the old version to workers
of the old version instead of replaying them against different code."""
DEFAULT_QUEUE = "mainspring"
WORKFLOW_NAME = "mainspring.run"


def database_url(url: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The database of durable runs: ``url``, else ``MAINSPRING_DATABASE_URL``, else the
    SQLite file in the data directory (whose directory is created, mode 0700)."""
    env = os.environ if environ is None else environ
    chosen = url or env.get("MAINSPRING_DATABASE_URL")
    if chosen:
        if chosen.startswith("postgres://"):
            chosen = "postgresql://" + chosen[len("postgres://") :]
        if not (chosen.startswith("sqlite:///") or chosen.startswith("postgresql://")):
            scheme = chosen.split(":", 1)[0] if ":" in chosen else chosen[:20]
            raise ValueError(
                "the runs database URL must be sqlite:///PATH or "
                f"postgresql://USER@HOST/DATABASE, not one starting {scheme!r}"
            )
        return chosen
    directory = data_dir(env, strict=True)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    directory.chmod(0o700)  # the data directory is the user's alone, whenever it was made
    return f"sqlite:///{directory / 'durable.sqlite'}"


def is_sqlite(url: str) -> bool:
    """Whether ``url`` names an SQLite database."""
    return url.startswith("sqlite")


def sqlite_path(url: str) -> Path:
    """The file of an ``sqlite:///path`` URL (its query, if any, left out)."""
    return Path(url.split("://", 1)[1][1:].split("?", 1)[0])


def secure_sqlite_file(url: str) -> None:
    """Make an SQLite database file readable by its owner only (0600), creating it empty
    if missing, before anything writes to it (SQLite gives its ``-wal`` and ``-shm``
    files the database file's mode); a directory this creates is 0700."""
    path = sqlite_path(url)
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(descriptor, 0o600)
    finally:
        os.close(descriptor)
    # WAL is a property of the file: set once here, waiting for a lock another process
    # holds, never by each new connection (two processes starting together then failed
    # with "database is locked" switching modes)
    connection = sqlite3.connect(path, timeout=60)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()


def display_url(url: str) -> str:
    """``url`` as it may be shown (its password hidden)."""
    if is_sqlite(url):
        return url
    import sqlalchemy as sa

    return sa.engine.make_url(url).render_as_string(hide_password=True)


def check_database(url: str, *, create: bool = False) -> None:
    """Make sure the PostgreSQL database of ``url`` exists: ``ValueError`` if it does not
    (a misspelled name is never created), unless ``create``, which creates it."""
    if is_sqlite(url):
        return
    import sqlalchemy as sa

    engine_url = sa.engine.make_url(url.replace("postgresql://", "postgresql+psycopg://", 1))
    name = engine_url.database
    server = sa.create_engine(
        engine_url.set(database="postgres"),
        isolation_level="AUTOCOMMIT",
        poolclass=sa.pool.NullPool,
    )
    try:
        with server.connect() as connection:
            query = sa.text("SELECT 1 FROM pg_database WHERE datname = :name")
            if connection.execute(query, {"name": name}).scalar():
                return
            if not create:
                raise ValueError(
                    f"the PostgreSQL database {name!r} does not exist; create it, or start "
                    "a worker with --create-database"
                )
            quoted = '"' + str(name).replace('"', '""') + '"'
            connection.execute(sa.text(f"CREATE DATABASE {quoted}"))
    finally:
        server.dispose()


def dbos_config(url: str, executor_id: str | None = None) -> dict[str, Any]:
    """The DBOS configuration of a worker on ``url`` (``executor_id``: its stable name)."""
    config: dict[str, Any] = {
        "name": APP_NAME,
        "system_database_url": url,
        "application_version": APP_VERSION,
        "log_level": os.environ.get("MAINSPRING_DBOS_LOG_LEVEL", "WARNING"),
        # a waiting recv/get_event and a queue notice a change within this interval
        "notification_listener_polling_interval_sec": 0.05,
        "serializer": JSON_ROWS,  # rows are JSON; a pickled one is refused
    }
    if executor_id:
        config["executor_id"] = executor_id
    return config
