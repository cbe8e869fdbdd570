"""Session files are private, hold one conversation, have one writer, and lose nothing."""

from __future__ import annotations

import asyncio
import json
import math
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from mainspring import Agent, ToolResult, ToolResultMessage, UserMessage, sessions, tool
from mainspring.sessions import read_session
from mainspring.settings import Settings
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar, faux


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent(path: Path, provider: FauxProvider, **kwargs: object) -> Agent:
    return Agent(
        model="faux:t",
        provider=provider,
        tools=[add],
        system_prompt="be brief",
        settings=Settings(session_path=str(path)),
        autoload=False,
        **kwargs,  # type: ignore[arg-type]
    )


def _resume(path: Path, *steps: object) -> Agent:
    return Agent.from_session(path, provider=FauxProvider(list(steps)), tools=[add], autoload=False)


async def _recorded(path: Path) -> Agent:
    agent = _agent(path, FauxProvider([faux.tool_call("add", {"a": 1, "b": 2}), faux.text("3")]))
    await agent.prompt("1+2?")
    return agent


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


# -- private ------------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o000], indirect=True)
async def test_new_files_and_directories_are_private_whatever_the_umask(
    tmp_path: Path, umask: int
) -> None:
    os.chmod(tmp_path, 0o755)
    path = tmp_path / "a" / "b" / "s.jsonl"
    await _recorded(path)
    assert _mode(path) == 0o600
    assert _mode(tmp_path / "a") == 0o700
    assert _mode(tmp_path / "a" / "b") == 0o700
    assert _mode(tmp_path) == 0o755  # an existing directory is left as it is


async def test_an_existing_session_file_is_made_private_when_written(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    await _recorded(path)
    path.chmod(0o644)
    agent = _resume(path, faux.text("ok"))
    await agent.prompt("more")
    assert _mode(path) == 0o600


# -- nothing lost -------------------------------------------------------------------------


async def test_a_complete_last_line_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = await _recorded(path)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # a crash right before the newline
    session = read_session(path)
    assert session.torn_line is None
    assert session.messages == list(first.state.messages)
    agent = _resume(path, faux.text("ok"))
    await agent.prompt("more")
    reread = read_session(path)
    assert reread.messages == list(agent.state.messages)
    assert reread.messages[:4] == list(first.state.messages)
    assert all(json.loads(line) for line in path.read_text().splitlines())


# -- one file, one conversation -----------------------------------------------------------


async def test_a_fresh_agent_on_a_recorded_session_is_refused_at_construction(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    await _recorded(path)
    before = path.read_bytes()
    with pytest.raises(sessions.SessionConflictError) as caught:
        _agent(path, FauxProvider([faux.text("x")]))
    message = str(caught.value)
    assert str(path) in message
    assert "already holds a conversation" in message
    assert "Agent.from_session" in message
    assert isinstance(caught.value, ValueError)
    with pytest.raises(sessions.SessionConflictError):  # another conversation given as messages=
        _agent(path, FauxProvider(), messages=read_session(path).messages[:2])
    assert path.read_bytes() == before


async def test_two_fresh_agents_on_one_new_path_never_splice(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = _agent(path, FauxProvider([faux.text("one")]))
    second = _agent(path, FauxProvider([faux.text("two")]))  # the file does not exist yet
    await first.prompt("first")
    recorder = EventRecorder()
    second.subscribe(recorder)
    await second.prompt("second")
    check_event_grammar(recorder.events)
    assert recorder.events[-1].reason == "error"
    assert str(path) in (second.state.error_message or "")
    assert read_session(path).messages == list(first.state.messages)
    assert len(second.provider.requests) == 0  # type: ignore[attr-defined]


async def test_a_second_writer_is_refused_while_the_first_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    entered, release = asyncio.Event(), asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait until released."""
        entered.set()
        await release.wait()
        return "released"

    await _recorded(path)
    writer = Agent.from_session(
        path,
        provider=FauxProvider([faux.tool_call("wait", {}), faux.text("done")]),
        tools=[add, wait],
        autoload=False,
    )
    idle = _resume(path, faux.text("never"))  # built while nobody writes: accepted
    running = asyncio.ensure_future(writer.prompt("wait"))
    await entered.wait()
    with pytest.raises(sessions.SessionConflictError, match="another agent is writing it"):
        _resume(path)
    recorder = EventRecorder()
    idle.subscribe(recorder)
    await idle.prompt("me too")  # its run starts while the lock is held
    check_event_grammar(recorder.events)
    assert "another agent is writing it" in (idle.state.error_message or "")
    release.set()
    await running
    assert writer.state.error_message is None
    assert read_session(path).messages == list(writer.state.messages)


async def test_an_idle_agent_does_not_append_to_a_file_another_agent_continued(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    first = await _recorded(path)
    first.provider.append(faux.text("stale"))  # type: ignore[attr-defined]
    second = _resume(path, faux.text("fresh"))
    await second.prompt("continue")
    await first.prompt("continue the old one")
    assert "changed since this agent last read or wrote it" in (first.state.error_message or "")
    assert read_session(path).messages == list(second.state.messages)


async def test_a_reset_agent_does_not_append_a_new_conversation(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    agent = await _recorded(path)
    recorded = read_session(path).messages
    agent.reset()
    agent.provider.append(faux.text("new"))  # type: ignore[attr-defined]
    await agent.prompt("a new conversation")
    assert "no longer continues" in (agent.state.error_message or "")
    assert read_session(path).messages == recorded


# -- tool results on reading --------------------------------------------------------------


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


async def test_an_orphan_or_missing_tool_result_is_an_error_naming_the_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    await _recorded(path)
    header, user, call, result, answer = _lines(path)
    cases = {
        "orphan": ([header, user, result, answer], 3, "which the assistant message"),
        "second": ([header, user, call, result, result, answer], 5, "a second result"),
        "missing": ([header, user, call, answer], 3, "have no result before the next"),
    }
    for name, (lines, line, reason) in cases.items():
        bad = tmp_path / f"{name}.jsonl"
        bad.write_text("".join(lines))
        with pytest.raises(sessions.SessionFormatError) as caught:
            read_session(bad)
        assert (caught.value.line, name) == (line, name)
        assert reason in str(caught.value)
        with pytest.raises(sessions.SessionFormatError):
            Agent.from_session(bad, provider=FauxProvider(), autoload=False)


async def test_a_file_ending_mid_batch_resumes_with_interrupted_results(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    provider = FauxProvider(
        [
            faux.reply(
                faux.tool_call("add", {"a": 1, "b": 2}), faux.tool_call("add", {"a": 3, "b": 4})
            ),
            faux.text("done"),
        ]
    )
    agent = _agent(path, provider)
    await agent.prompt("two sums")
    lines = _lines(path)
    path.write_text("".join(lines[:4]))  # header, user, the calls, one result: a crash
    session = read_session(path)
    assert session.interrupted_line == 3
    assert session.synthesized == 1
    missing = session.messages[-1]
    assert missing.is_error and missing.text == sessions.INTERRUPTED
    assert missing.tool_call_id == agent.state.messages[1].tool_calls[1].id

    resumed = _resume(path, faux.text("retrying"))
    await resumed.resume()
    sent = resumed.provider.requests[0].messages  # type: ignore[attr-defined]
    assert sent[-1].text == sessions.INTERRUPTED
    reread = read_session(path)
    assert reread.synthesized == 0
    assert reread.messages == list(resumed.state.messages)


# -- recording never fails a run ----------------------------------------------------------


class Note(BaseModel):
    """A custom transcript entry holding whatever a program put in it."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    role: str = "note"
    blob: Any = None


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    return loop


@pytest.mark.parametrize(
    ("details", "written"),
    [
        (object(), "<unserializable: object>"),
        (threading.Lock(), "<unserializable: _thread.lock>"),
        (b"\xff\xfe", "<bytes: 2 bytes, not UTF-8>"),
        (_circular(), {"name": "loop", "self": "<circular reference: dict>"}),
    ],
)
async def test_values_that_are_not_json_are_described_and_the_run_goes_on(
    tmp_path: Path, details: Any, written: Any
) -> None:
    path = tmp_path / "s.jsonl"

    @tool
    def odd() -> ToolResult:
        """Return odd details."""
        return ToolResult("ok", details=details)

    agent = Agent(
        model="faux:t",
        provider=FauxProvider([faux.tool_call("odd", {}), faux.text("done")]),
        tools=[odd],
        settings=Settings(session_path=str(path)),
        autoload=False,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt([UserMessage(content="odd \ud800 text"), Note(blob=details)])
    check_event_grammar(recorder.events)
    assert agent.state.error_message is None
    stored = read_session(path).messages
    assert [m.role for m in stored] == ["user", "note", "assistant", "tool_result", "assistant"]
    assert stored[0].content == "odd \ud800 text"
    assert stored[1].blob == written  # a custom entry reaches the file as the agent holds it
    assert stored[3].text == "ok"
    json.dumps(stored[3].details)  # whatever the kernel handed on, it was written as JSON


def test_encoding_never_iterates_a_generator_and_bounds_nesting() -> None:
    started: list[bool] = []

    def endless() -> Iterator[int]:  # finite here, so that a version that iterates ends
        started.append(True)
        yield from range(3)

    deep: list[Any] = []
    inner = deep
    for _ in range(10_000):
        inner.append([])
        inner = inner[0]
    message = ToolResultMessage(
        tool_call_id="c", tool_name="t", details={"gen": endless(), "deep": deep, "nan": math.nan}
    )
    data = sessions.encode_message(message)
    assert data["details"]["gen"] == "<unserializable: generator>"
    assert data["details"]["nan"] is None
    assert f"nested deeper than {sessions.MAX_DEPTH}" in json.dumps(data)
    assert not started


_FULL_DISK = """
import asyncio, json, logging, resource, signal, sys
from mainspring import Agent
from mainspring.sessions import read_session
from mainspring.settings import Settings
from mainspring.testing import FauxProvider, faux

path = sys.argv[1]
errors = []
class Collect(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.ERROR:
            errors.append([record.getMessage(), getattr(record, "path", None)])
logging.getLogger("mainspring.sessions").addHandler(Collect())
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
provider = FauxProvider([faux.text("one"), faux.text("x" * 2000), faux.text("three")])
agent = Agent(model="faux:t", provider=provider, autoload=False,
              settings=Settings(session_path=path))

async def main():
    await agent.prompt("first")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    with open(path, "rb") as handle:
        size = len(handle.read())
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 200, hard))
    await agent.prompt("second")
    second_error = agent.state.error_message
    with open(path, "rb") as handle:
        during = handle.read()
    stored = read_session(path).messages
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    await agent.prompt("third")
    print(json.dumps({
        "second_error": second_error,
        "whole_lines": during.endswith(b"\\n"),
        "prefix": stored == list(agent.state.messages)[: len(stored)],
        "stored_during": len(stored),
        "final": read_session(path).messages == list(agent.state.messages),
        "errors": errors,
    }))

asyncio.run(main())
"""


def test_a_failed_write_is_logged_never_fails_the_run_and_is_caught_up(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["second_error"] is None  # the run itself went on
    assert seen["whole_lines"]  # the partial line was cut off
    assert seen["prefix"]
    assert 3 <= seen["stored_during"] < 6
    assert seen["final"]  # the next run wrote what was missed first: no hole
    assert len(seen["errors"]) == 1
    assert seen["errors"][0] == ["session_write_failed", str(path)]
