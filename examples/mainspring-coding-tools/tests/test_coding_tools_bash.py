"""bash: output, exit codes, the timeout, the output cap, abort, and no leftover processes."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mainspring_coding_tools import build_tools

from mainspring.testing import EventRecorder, check_event_grammar, faux

Survivors = Callable[[int], list[int]]

OUTSIDE = "off"
"""``bash_sandbox`` for tests that check a command's pids from here: unsandboxed, they are
pids of this PID namespace (the sandbox's own test is in test_coding_tools_sandbox)."""
Exited = Callable[[int], bool]


async def test_bash_reports_output_and_exit_code(coding_call: Any) -> None:
    ok, failing, quiet = await coding_call(
        ("bash", {"command": "echo out; echo err >&2"}),
        ("bash", {"command": "echo before; exit 3"}),
        ("bash", {"command": "true"}),
    )

    assert not ok.is_error
    assert ok.text == "out\nerr\n[exit code: 0]"
    assert ok.details == {"exit_code": 0, "timed_out": False, "output_chars": 8, "truncated": False}
    assert failing.is_error
    assert failing.text == "before\n[exit code: 3]"
    assert failing.details["exit_code"] == 3
    assert quiet.text == "(no output)\n[exit code: 0]"


async def test_bash_has_no_stdin_and_no_pager(coding_call: Any) -> None:
    (result,) = await coding_call(("bash", {"command": 'cat; echo "pager=$PAGER"'}))

    assert result.text == "pager=cat\n[exit code: 0]"


async def test_bash_timeout_kills_the_whole_process_group(
    coding_ws: Path, coding_call: Any, coding_exited: Exited
) -> None:
    started = time.monotonic()

    (result,) = await coding_call(
        ("bash", {"command": "echo started; sleep 30 & echo $! > child.pid; wait"}),
        bash_timeout_s=0.5,
        bash_sandbox=OUTSIDE,
    )

    assert time.monotonic() - started < 10
    assert result.is_error
    assert (
        result.text
        == "started\n[timed out after 0.5 s: the command and every process it started were killed]"
    )
    assert result.details["timed_out"] is True
    assert coding_exited(int((coding_ws / "child.pid").read_text()))  # the shell's child went too


async def test_a_call_may_ask_for_its_own_timeout_within_the_maximum(coding_call: Any) -> None:
    short, too_long = await coding_call(
        ("bash", {"command": "sleep 30", "timeout_s": 0.3}),
        ("bash", {"command": "true", "timeout_s": 5000}),
        bash_max_timeout_s=60,
    )

    assert short.is_error and "[timed out after 0.3 s" in short.text
    assert too_long.is_error
    assert 'Invalid arguments for tool "bash"' in too_long.text
    assert "timeout_s" in too_long.text


async def test_bash_caps_the_output_keeping_head_and_tail(coding_call: Any) -> None:
    command = "for i in $(seq 1 5000); do echo line-$i; done"

    (result,) = await coding_call(("bash", {"command": command}), bash_max_output_chars=1000)

    text = result.text
    assert text.startswith("line-1\nline-2\n")
    assert text.endswith("line-5000\n[exit code: 0]")
    assert "characters of output cut ...]" in text
    assert len(text) < 1200
    assert result.details["truncated"] is True
    assert result.details["output_chars"] == sum(len(f"line-{i}\n") for i in range(1, 5001))


async def test_background_processes_end_with_the_command(
    coding_ws: Path, coding_call: Any, coding_exited: Exited
) -> None:
    started = time.monotonic()

    (result,) = await coding_call(
        ("bash", {"command": "sleep 30 & echo $! > bg.pid; echo spawned"}),
        bash_timeout_s=20,
        bash_sandbox=OUTSIDE,
    )

    assert time.monotonic() - started < 10  # not held open by the background sleep
    assert result.text == "spawned\n[exit code: 0]"
    assert coding_exited(int((coding_ws / "bg.pid").read_text()))


async def test_abort_kills_the_running_command(
    coding_make_agent: Any, coding_survivors: Survivors
) -> None:
    steps = [faux.tool_call("bash", {"command": "sleep 30; echo never"}), faux.text("unused")]
    agent, _ = coding_make_agent(steps, bash_sandbox=OUTSIDE)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    groups: list[int] = []

    def abort_once_running(event: Any, signal: Any) -> None:
        if event.type == "tool_execution_update" and event.tool_name == "bash":
            groups.append(event.partial_result["pid"])
            agent.abort()

    agent.subscribe(abort_once_running)
    started = time.monotonic()

    await agent.prompt("go")

    assert time.monotonic() - started < 10
    check_event_grammar(recorder.events)
    assert len(groups) == 1, "the bash tool sends one pid update once the process runs"
    (result,) = recorder.messages("tool_result")
    assert result.is_error
    assert "aborted" in result.text.lower()
    (end,) = recorder.of_type("agent_end")
    assert end.reason == "aborted"
    assert coding_survivors(groups[0]) == []


def test_bash_is_sequential_and_the_file_tools_are_not(coding_ws: Path) -> None:
    tools = {built.name: built for built in build_tools(coding_ws)}

    assert tools["bash"].sequential is True
    assert [name for name, built in tools.items() if built.sequential] == ["bash"]


async def test_a_batch_with_bash_runs_in_call_order(coding_ws: Path, coding_call: Any) -> None:
    written, shown, edited, shown_again = await coding_call(
        ("write", {"path": "a.txt", "content": "one\n"}),
        ("bash", {"command": "cat a.txt"}),
        ("edit", {"path": "a.txt", "old_text": "one", "new_text": "two"}),
        ("bash", {"command": "cat a.txt"}),
    )

    assert not written.is_error and not edited.is_error
    assert shown.text == "one\n[exit code: 0]"
    assert shown_again.text == "two\n[exit code: 0]"
