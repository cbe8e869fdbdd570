"""Executor ids: unique among live workers by default, taken back by a restarted worker.

Two workers started with no options hold different ids (each would otherwise recover,
and run again, the runs the other is running); a worker killed and restarted with no
options takes its id back and finishes its run; a chosen id held by a live worker is
refused with a sentence (exit 2).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from mainspring.durable import Runs


def _ready(directory: Path, process: Any) -> str:
    path = directory / f"ready-{process.pid}"
    return path.read_text() if path.exists() else ""


def test_workers_without_options_hold_distinct_ids_and_a_restart_takes_its_back(
    workers: Any,
) -> None:
    directory = workers.directory
    host = socket.gethostname()
    with Runs(workers.url) as runs:
        run_id = runs.submit("Do the three steps.")
        first = workers.start("", "between")
        first_id = workers.wait(lambda: _ready(directory, first), 60, "the first worker")
        workers.wait(lambda: (directory / "crashed").exists(), 60, "the first worker's stop")
        second = workers.start("")
        second_id = workers.wait(lambda: _ready(directory, second), 60, "the second worker")
        assert (first_id, second_id) == (f"{host}-1", f"{host}-2")
        # the second worker did not take the first one's run
        assert runs.get(run_id).executor_id == first_id
        assert runs.get(run_id).status == "PENDING"
        workers.kill(first)
        third = workers.start("")
        assert workers.wait(lambda: _ready(directory, third), 60, "the restart") == first_id
        outcome = runs.result(run_id, timeout_s=120)
        assert outcome["reason"] == "stop"
    tools = (directory / "tools.log").read_text().splitlines()
    assert len(tools) == len(set(tools)) == 6, tools


def test_a_chosen_id_held_by_a_live_worker_is_refused(workers: Any) -> None:
    live = workers.start("busy")
    workers.wait(lambda: _ready(workers.directory, live), 60, "the worker")
    refused = subprocess.run(
        [sys.executable, "-m", "mainspring", "worker", "--id", "busy", "--database", workers.url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("mainspring: error: executor id 'busy' is held by")
    assert "Traceback" not in refused.stderr
