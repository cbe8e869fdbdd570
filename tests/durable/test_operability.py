"""Operating durable runs from the command line: errors, the worker's lines, waiting.

Configuration errors are one sentence and exit 2 (no traceback); a PostgreSQL database
that does not exist is an error unless ``worker --create-database``; a worker and a
submit started together on a fresh SQLite file both work (20 times); ``submit --wait``,
``runs follow`` and ``runs cancel``; ``submit`` refuses an empty prompt and an existing id
with another prompt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mainspring.durable import Runs

APP = Path(__file__).with_name("worker_app.py")
PROMPT = "Do the three steps."


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mainspring", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )


def _refused(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.startswith("mainspring: error: "), result.stderr
    assert words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_configuration_errors_are_one_sentence_and_exit_2(workers: Any, tmp_path: Path) -> None:
    _refused(_cli("runs", "--database", "mysql://root@localhost/x"), "must be sqlite:///PATH")
    _refused(_cli("runs", "--database", "not a url"), "must be sqlite:///PATH")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _refused(_cli("runs", "--database", f"sqlite:///{blocker}/runs.sqlite"), "cannot be used")
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    _refused(_cli("runs", "--database", f"sqlite:///{corrupt}"), "cannot be used")
    _refused(_cli("submit", "", "--database", workers.url), "a run needs a prompt")
    first = _cli("submit", PROMPT, "--id", "fixed", "--database", workers.url)
    assert (first.returncode, first.stdout.strip()) == (0, "fixed"), first.stderr
    again = _cli("submit", PROMPT, "--id", "fixed", "--database", workers.url)
    assert (again.returncode, again.stdout.strip()) == (0, "fixed"), again.stderr
    _refused(
        _cli("submit", "Something else.", "--id", "fixed", "--database", workers.url),
        "exists with another prompt",
    )
    debug = _cli("--log-level", "DEBUG", "runs", "--database", "mysql://x")
    assert debug.returncode == 2 and "Traceback" in debug.stderr


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
def test_a_missing_postgresql_database_is_created_only_when_asked(
    workers: Any, tmp_path: Path
) -> None:
    missing = workers.url.rsplit("/", 1)[0] + "/t_missing_" + os.urandom(4).hex()
    _refused(_cli("runs", "--database", missing), "does not exist")
    _refused(_cli("submit", PROMPT, "--database", missing), "does not exist")
    log = tmp_path / "worker.out"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mainspring",
                "worker",
                "--create-database",
                "--database",
                missing,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1"},
        )
    workers.processes.append(worker)
    workers.wait(lambda: " ready: " in log.read_text(), 60, "the worker's ready line")
    listed = _cli("runs", "--database", missing)
    assert listed.returncode == 0, listed.stderr


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_a_worker_and_a_submit_started_together_both_work(workers: Any, tmp_path: Path) -> None:
    for attempt in range(20):
        url = f"sqlite:///{tmp_path / f'race-{attempt}.sqlite'}"
        directory = tmp_path / f"race-{attempt}"
        directory.mkdir()
        with open(directory / "worker.log", "wb") as log:
            worker = subprocess.Popen(
                [sys.executable, str(APP), str(directory), url, ""],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        workers.processes.append(worker)
        submitted = _cli("submit", PROMPT, "--database", url)
        assert submitted.returncode == 0, (attempt, submitted.stderr)
        with Runs(url) as runs:
            try:
                outcome = runs.result(submitted.stdout.strip(), timeout_s=120)
            except TimeoutError:
                raise AssertionError((directory / "worker.log").read_text()[-3000:]) from None
        assert outcome["reason"] == "stop"
        assert worker.poll() is None, (attempt, (directory / "worker.log").read_text()[-3000:])
        workers.kill(worker)


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_the_worker_reports_and_runs_are_waited_for_followed_and_cancelled(
    workers: Any, tmp_path: Path
) -> None:
    log = tmp_path / "worker.out"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mainspring",
                "worker",
                "--factory",
                "worker_app:factory",
                "--database",
                workers.url,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env={
                **os.environ,
                "PYTHONPATH": str(APP.parent),
                "ASK": "1",
                "MAINSPRING_DISABLE_PLUGIN_AUTOLOAD": "1",
            },
        )
    workers.processes.append(worker)
    workers.wait(lambda: " ready: " in log.read_text(), 60, "the worker's ready line")
    with Runs(workers.url) as runs:
        waiting = runs.submit(PROMPT)
        workers.wait(
            lambda: any(e["type"] == "tool_approval_request" for e in runs.events(waiting)),
            60,
            "the approval request",
        )
        cancelled = _cli("runs", "cancel", waiting, "--database", workers.url)
        assert cancelled.returncode == 0, cancelled.stderr
        workers.wait(lambda: runs.get(waiting).status == "CANCELLED", 60, "the cancellation")
        again = _cli("runs", "resume", waiting, "--database", workers.url)
        assert again.returncode == 0, again.stderr
        workers.wait(lambda: runs.get(waiting).status == "PENDING", 60, "the resumed run")
        runs.approve(waiting, "c1", "allow", reason="after the resume")
        assert runs.result(waiting, timeout_s=120)["reason"] == "stop"
        decisions = [e for e in runs.events(waiting) if e["type"] == "tool_decision"]
        assert [e["reason"] for e in decisions if e["tool_call_id"] == "c1"] == ["after the resume"]
        _refused(_cli("runs", "resume", waiting, "--database", workers.url), "not cancelled")
    waited = _cli("submit", "Long reply, please.", "--wait", "--database", workers.url)
    assert waited.returncode == 0, waited.stderr
    run_id, text = waited.stdout.splitlines()[:2]
    assert text == "z" * 8000
    followed = _cli("runs", "follow", run_id, "--database", workers.url)
    assert followed.returncode == 0, followed.stderr
    types = [json.loads(line)["type"] for line in followed.stdout.splitlines()]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    lines = log.read_text().splitlines()
    assert len([line for line in lines if " ready: " in line]) == 1
    assert any(f"run {run_id} started" in line for line in lines), lines
    assert any(f"run {run_id} settled: stop" in line for line in lines), lines
