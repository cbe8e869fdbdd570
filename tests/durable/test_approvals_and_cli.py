"""Durable approvals and the commands: a decision sent from another process, across a restart.

A gate asks about the ``append`` call; the worker waits durably; it is killed while it
waits and restarted; ``mainspring runs approve`` (another process) decides; the run goes
on with the decision, and ``mainspring runs`` / ``runs show`` report it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from mainspring.durable import Runs


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mainspring", *args, "--database", url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )


def _asked(runs: Runs, run_id: str) -> bool:
    return any(e["type"] == "tool_approval_request" for e in runs.events(run_id))


@pytest.mark.parametrize("allow", [True, False])
def test_an_approval_sent_later_from_another_process_decides_the_waiting_call(
    workers: Any, allow: bool
) -> None:
    with Runs(workers.url) as runs:
        submitted = _cli(workers.url, "submit", "Do the three steps.")
        assert submitted.returncode == 0, submitted.stderr
        run_id = submitted.stdout.strip()
        first = workers.start("w1", ASK="1")
        workers.wait(lambda: _asked(runs, run_id), 60, "the approval request")
        # the worker dies while the call waits; its replacement waits on
        workers.kill(first)
        workers.start("w1", ASK="1")
        decision = "--allow" if allow else "--deny"
        sent = _cli(workers.url, "runs", "approve", run_id, "c1", decision, "--reason", "ok")
        assert sent.returncode == 0, sent.stderr
        outcome = runs.result(run_id, timeout_s=120)
        assert outcome["reason"] == "stop"
        decisions = [e for e in runs.events(run_id) if e["type"] == "tool_decision"]
        asked = [e for e in decisions if e["tool_call_id"] == "c1"]
        assert [(e["decision"], e["reason"]) for e in asked] == [
            ("allow" if allow else "block", "ok")
        ]
        requests = [e for e in runs.events(run_id) if e["type"] == "tool_approval_request"]
        assert len(requests) == 1  # the replayed request was not delivered again
    tools = (workers.directory / "tools.log").read_text()
    assert ("c1 append done" in tools) is allow

    listed = _cli(workers.url, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["run_id"], r["status"], r["reason"], r["turns"]) for r in rows] == [
        (run_id, "SUCCESS", "stop", 4)
    ]
    shown = _cli(workers.url, "runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"run {run_id}: success, 4 turns, stop")
    assert "All done" in shown.stdout
    unknown = _cli(workers.url, "runs", "show", "nope")
    assert unknown.returncode == 2
    assert "no durable run 'nope'" in unknown.stderr
