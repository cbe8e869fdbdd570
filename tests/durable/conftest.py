"""Fixtures of the durable-run tests: databases, worker processes, polling with deadlines.

These tests run with ``MAINSPRING_SLOW_TESTS=1`` (``.ci/run`` does); they start worker
processes and kill them. The PostgreSQL ones start a private cluster from the Debian
``postgresql`` package (``/usr/lib/postgresql/*/bin``): ``initdb`` into a temporary
directory as the ``postgres`` user, a loopback port, stopped at the end of the session.
Without PostgreSQL they skip, saying how to run them; in CI (``CI=true``) they fail.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    import dbos  # noqa: F401

    _SKIP: str | None = None
except ImportError:
    _SKIP = "durable runs need the durable extra: pip install -e '.[dev]'"
if os.environ.get("MAINSPRING_SLOW_TESTS") != "1":
    _SKIP = "durable-run tests run with MAINSPRING_SLOW_TESTS=1 (.ci/run does)"
if _SKIP is not None:
    # the test modules import mainspring.durable: not even collected
    collect_ignore_glob = ["test_*.py"]

APP = Path(__file__).with_name("worker_app.py")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
HOW = (
    "PostgreSQL tests need the Debian postgresql package (initdb, pg_ctl under "
    "/usr/lib/postgresql/*/bin) and root or the postgres user; install it with "
    "`apt-get install postgresql` and run MAINSPRING_SLOW_TESTS=1 pytest tests/durable"
)


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """A private PostgreSQL cluster run by the ``postgres`` user."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            raise RuntimeError("no initdb under /usr/lib/postgresql/*/bin")
        self.bin = Path(found[-1]).parent
        self.root = Path(tempfile.mkdtemp(prefix="mainspring-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_postgres = [] if os.getuid() != 0 else ["runuser", "-u", "postgres", "--"]
        if os.getuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        os.chmod(self.root, 0o700)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust")
        self.start()

    def start(self) -> None:
        """Start the server (again, after :meth:`pause`), waiting until it accepts."""
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-w",
            "-o",
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c max_connections=300 -c fsync=off",
            "start",
        )

    def pause(self) -> None:
        """Stop the server, keeping its data (every connection is lost)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def _run(self, *command: str) -> None:
        subprocess.run([*self.as_postgres, *command], check=True, capture_output=True, timeout=120)

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        import sqlalchemy as sa

        name = "t_" + uuid.uuid4().hex[:12]
        engine = sa.create_engine(
            self.url("postgres").replace("postgresql://", "postgresql+psycopg://"),
            isolation_level="AUTOCOMMIT",
        )
        with engine.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    try:
        started = Cluster()
    except (RuntimeError, OSError, subprocess.SubprocessError, KeyError) as error:
        detail = getattr(error, "stderr", b"") or b""
        message = f"cannot start PostgreSQL ({error} {detail.decode(errors='replace')}). {HOW}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database for one test: an SQLite file, or a database in the cluster."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.sqlite'}"
    cluster: Cluster = request.getfixturevalue("cluster")
    return cluster.create_database()


class Workers:
    """Worker processes of one test (killed at its end)."""

    def __init__(self, directory: Path, url: str) -> None:
        self.directory = directory
        self.url = url
        self.processes: list[subprocess.Popen[bytes]] = []
        self.wait = wait_for

    def start(self, executor: str, crash: str = "", **env: str) -> subprocess.Popen[bytes]:
        path = self.directory / f"worker-{len(list(self.directory.glob('worker-*.log')))}.log"
        with open(path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, str(APP), str(self.directory), self.url, executor, crash],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
            )
        self.processes.append(process)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def stop_all(self) -> None:
        """Kill every worker still running (a test's workers never outlive it)."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        self.processes.clear()

    def logs(self) -> str:
        return "\n".join(
            path.read_text(errors="replace")[-3000:]
            for path in sorted(self.directory.glob("worker-*.log"))
        )


@pytest.fixture(autouse=True)
def approval_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The approval key of the test's workers and of its decisions (inherited by the
    processes it starts); tools never see it (``mainspring.durable.credentials``)."""
    path = tmp_path / "keys" / "approval.key"
    path.parent.mkdir(mode=0o700)
    path.write_text(uuid.uuid4().hex + uuid.uuid4().hex)
    path.chmod(0o600)
    monkeypatch.setenv("MAINSPRING_APPROVAL_KEY_FILE", str(path))
    return path


@pytest.fixture
def wait() -> Callable[[Callable[[], Any], float, str], Any]:
    """:func:`wait_for`: poll a condition with a deadline."""
    return wait_for


@pytest.fixture
def workers(database: str, tmp_path: Path) -> Iterator[Workers]:
    group = Workers(tmp_path, database)
    try:
        yield group
    finally:
        group.stop_all()
