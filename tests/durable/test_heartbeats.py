"""Worker heartbeats: ``submit`` warns when no worker of the queue has been seen recently.

A worker refreshes its row while it serves (here every 0.2 s, taken for dead after 2 s):
``submit`` with no worker, or only a killed one whose row went stale, prints the run id,
warns on stderr in one line and exits 0; with a live worker it says nothing more. A
worker stopped with SIGTERM deletes its row at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from mainspring.durable import Runs

APP = Path(__file__).with_name("worker_app.py")
PROMPT = "Do the three steps."
BEATS = {"MAINSPRING_HEARTBEAT_S": "0.2", "MAINSPRING_WORKER_STALE_S": "2"}
WARNING = "mainspring: warning: no worker of queue 'mainspring' has been seen in the last 2 s"


def _submit(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mainspring", "submit", PROMPT, "--database", url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **BEATS, "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )


def _warned(result: subprocess.CompletedProcess[str]) -> bool:
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.split()) == 1, result.stdout  # the run id
    return WARNING in result.stderr


def test_submit_warns_when_no_worker_was_seen_recently(workers: Any) -> None:
    first = _submit(workers.url)
    assert _warned(first)
    assert len(first.stderr.strip().splitlines()) == 1, first.stderr

    worker = workers.start("w1", **BEATS)
    workers.wait(lambda: list(workers.directory.glob("ready-*")), 60, "the worker")
    assert not _warned(_submit(workers.url))

    workers.kill(worker)  # its row stays, and goes stale
    with Runs(workers.url) as runs:
        assert runs.live_workers(stale_s=3600) == ["w1"]
        workers.wait(lambda: not runs.live_workers(stale_s=2), 60, "the heartbeat to go stale")
    assert _warned(_submit(workers.url))


def test_a_worker_stopped_with_sigterm_is_no_longer_seen(workers: Any, tmp_path: Path) -> None:
    log = tmp_path / "worker.out"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "mainspring", "worker", "--factory", "worker_app:factory",
             "--id", "w9", "--database", workers.url],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env={**os.environ, **BEATS, "PYTHONPATH": str(APP.parent),
                 "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1"},
        )  # fmt: skip
    workers.processes.append(worker)
    workers.wait(lambda: " ready: " in log.read_text(), 60, "the worker's ready line")
    with Runs(workers.url) as runs:
        assert runs.live_workers() == ["w9"]
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, log.read_text()
        assert runs.live_workers(stale_s=3600) == []
    assert _warned(_submit(workers.url))
