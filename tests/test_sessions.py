"""Session files: round trip, resume, torn last line, malformed lines, replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mainspring import Agent, tool
from mainspring.sessions import SessionFormatError, read_session
from mainspring.settings import Settings
from mainspring.testing import (
    EventRecorder,
    FauxProvider,
    ReplayProvider,
    check_event_grammar,
    faux,
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent(path: Path, provider: FauxProvider) -> Agent:
    return Agent(
        model="faux:t",
        provider=provider,
        tools=[add],
        system_prompt="be brief",
        settings=Settings(session_path=str(path)),
        autoload=False,
    )


async def _recorded_session(path: Path) -> Agent:
    provider = FauxProvider([faux.tool_call("add", {"a": 1, "b": 2}), faux.text("3")])
    agent = _agent(path, provider)
    await agent.prompt("1+2?")
    return agent


async def test_session_file_equals_the_transcript(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    agent = await _recorded_session(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["type"] == "session"
    assert lines[0]["version"] == 1
    assert lines[0]["model"] == "faux:t"
    assert lines[0]["system_prompt"] == "be brief"
    assert [line["message"]["role"] for line in lines[1:]] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert read_session(path).messages == list(agent.state.messages)


async def test_file_is_written_by_the_time_each_message_end_listener_runs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    seen: list[int] = []
    agent = _agent(path, FauxProvider([faux.text("hi")]))
    agent.subscribe(
        lambda event, signal: (
            seen.append(len(path.read_text().splitlines())) if event.type == "agent_end" else None
        )
    )
    await agent.prompt("hello")
    # the session writer is an on_event hook, called after subscribers; by agent_end
    # every message line is already on disk
    assert seen == [3]


async def test_from_session_resumes_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = await _recorded_session(path)
    resumed = Agent.from_session(
        path, provider=FauxProvider([faux.text("again")]), tools=[add], autoload=False
    )
    assert list(resumed.state.messages) == list(first.state.messages)
    assert resumed.state.system_prompt == "be brief"
    await resumed.prompt("more")
    assert read_session(path).messages == list(resumed.state.messages)
    assert len(resumed.state.messages) == 6


async def test_failed_retry_attempt_is_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    provider = FauxProvider(
        [
            faux.error("overloaded", retryable=True, retry_after=0, after=[faux.text("par")]),
            faux.text("fine"),
        ]
    )
    agent = _agent(path, provider)
    await agent.prompt("go")
    recorded = read_session(path).messages
    assert [m.role for m in recorded] == ["user", "assistant"]
    assert recorded == list(agent.state.messages)


async def test_torn_last_line_is_reported_skipped_and_cut_before_appending(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    await _recorded_session(path)
    with path.open("a") as handle:
        handle.write('{"type":"message","message":{"role":"us')
    session = read_session(path)
    assert session.torn_line == 6
    assert len(session.messages) == 4
    agent = Agent.from_session(path, provider=FauxProvider([faux.text("ok")]), autoload=False)
    await agent.prompt("after the crash")
    reread = read_session(path)
    assert reread.torn_line is None
    assert reread.messages == list(agent.state.messages)


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        ("", 1, "empty"),
        ('{"type":"message"}\n', 1, "header"),
        ('{"type":"session","version":99,"model":"a:b","system_prompt":""}\n', 1, "version"),
        (
            '{"type":"session","version":1,"model":"a:b","system_prompt":""}\nnot json\n{}\n',
            2,
            "not valid JSON",
        ),
        (
            '{"type":"session","version":1,"model":"a:b","system_prompt":""}\n'
            '{"type":"message","message":{"role":"user"}}\n',
            2,
            "content",
        ),
        (
            '{"type":"session","version":1,"model":"a:b","system_prompt":""}\n{"type":"bogus"}\n',
            2,
            "unknown line type",
        ),
    ],
)
def test_malformed_lines_name_the_line(
    tmp_path: Path, content: str, line: int, reason: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(SessionFormatError) as caught:
        read_session(path)
    assert caught.value.line == line
    assert reason in str(caught.value)
    assert f"bad.jsonl:{line}" in str(caught.value)


async def test_replay_provider_reproduces_a_recorded_run(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    original = await _recorded_session(path)
    replay = ReplayProvider.from_session(path)
    agent = Agent(model="replay:x", provider=replay, tools=[add], autoload=False)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("1+2?")
    check_event_grammar(recorder.events)

    def shape(messages: tuple[object, ...]) -> list[tuple[str, str]]:
        return [(m.role, getattr(m, "text", "")) for m in messages]  # type: ignore[attr-defined]

    assert shape(agent.state.messages) == shape(original.state.messages)
    assert len(replay.requests) == 2


async def test_replay_exhausted_is_an_error_message(tmp_path: Path) -> None:
    replay = ReplayProvider([])
    agent = Agent(model="replay:x", provider=replay, autoload=False)
    await agent.prompt("hi")
    last = agent.state.messages[-1]
    assert last.stop_reason == "error"
    assert "replay exhausted" in last.error_message
