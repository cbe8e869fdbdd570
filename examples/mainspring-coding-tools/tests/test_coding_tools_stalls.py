"""No model-chosen input freezes the event loop, and every file tool has a deadline.

The figure that matters is the longest time the event loop is blocked while a tool runs,
measured with a heartbeat task (``Heartbeat``). The aim is under 100 ms for inputs up to
1 MB; the tests print the figure and assert a loose bound that a backtracking regex engine
misses by far.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mainspring_coding_tools import CodingToolsOptions, build_tools

LOOSE_BOUND_S = 1.0
MEGABYTE = 1_000_000

HOSTILE_PATTERNS = [r"(a+)+$", r"(a|aa)*b", r"(x+x+)+y", r"[ab]*a[ab]{20}c", r"(\w+\s?)+=$"]
"""Patterns that take exponential time in a backtracking engine on lines of ``a``."""


async def test_a_catastrophic_pattern_does_not_freeze_the_loop(
    coding_ws: Path, coding_call: Any, coding_heartbeat: Any
) -> None:
    # 25 characters: a backtracking engine needs seconds for this line
    (coding_ws / "a.txt").write_text("a" * 25 + "!\n")

    async with coding_heartbeat() as beat:
        (result,) = await coding_call(("grep", {"pattern": "(a+)+$"}))

    print(f"\nlongest event-loop stall, grep '(a+)+$' on 25 a's: {beat.longest * 1000:.1f} ms")
    assert result.text == "No matches for '(a+)+$' in ."
    assert beat.longest < LOOSE_BOUND_S


async def test_file_tools_on_megabyte_inputs_keep_the_loop_running(
    coding_ws: Path, coding_direct: Any, coding_heartbeat: Any
) -> None:
    (coding_ws / "line.txt").write_text("a" * MEGABYTE + "!\n")
    (coding_ws / "lines.txt").write_text(("a" * 98 + "!\n") * (MEGABYTE // 100) + "the end\n")
    (coding_ws / "many").mkdir()
    for n in range(500):
        (coding_ws / "many" / f"{n}.txt").touch()
    tools = {
        tool.name: tool for tool in build_tools(coding_ws, CodingToolsOptions(file_timeout_s=30))
    }

    async with coding_heartbeat() as beat:
        greps = [await coding_direct(tools["grep"], pattern=p) for p in HOSTILE_PATTERNS]
        read_line = await coding_direct(tools["read"], path="line.txt")
        read_lines = await coding_direct(tools["read"], path="lines.txt", offset=9000)
        edited = await coding_direct(
            tools["edit"], path="lines.txt", old_text="the end", new_text="the new end"
        )
        written = await coding_direct(tools["write"], path="copy.txt", content="b" * MEGABYTE)
        listed = await coding_direct(tools["ls"], path="many")

    print(f"\nlongest event-loop stall, file tools on 1 MB inputs: {beat.longest * 1000:.1f} ms")
    assert [result.is_error for result in greps] == [False] * len(HOSTILE_PATTERNS)
    assert greps[0].text.startswith("No matches")
    assert "[line cut: 1000001 characters]" in read_line.text
    assert not read_lines.is_error and not edited.is_error and not written.is_error
    assert listed.details["entries"] == 500
    assert beat.longest < LOOSE_BOUND_S


async def test_patterns_use_re2_syntax(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "a.txt").write_text("abab\nx = 1\n")

    backreference, lookahead, translated, glob = await coding_call(
        ("grep", {"pattern": r"(ab)\1"}),
        ("grep", {"pattern": r"x(?= =)"}),
        ("grep", {"pattern": r"^x = \d{,2}\Z"}),
        ("grep", {"pattern": "ab", "glob": "[!b]*.t?t"}),
    )

    assert backreference.is_error
    assert backreference.text.startswith(
        r"unsupported regular expression '(ab)\\1': a backreference (\1) is not supported. "
        "grep uses RE2 syntax, which matches in linear time"
    )
    assert lookahead.is_error and "lookahead (?=...) is not supported" in lookahead.text
    assert translated.text == "a.txt:2: x = 1"
    assert glob.text == "a.txt:1: abab"


async def test_every_file_tool_has_a_deadline(coding_ws: Path, coding_call: Any) -> None:
    (coding_ws / "big.txt").write_text("line\n" * 300_000)
    tools = build_tools(coding_ws, CodingToolsOptions(file_timeout_s=0.01))

    (grep,) = await coding_call(("grep", {"pattern": "absent"}), file_timeout_s=0.01)

    assert {tool.name: tool.timeout_s is not None for tool in tools} == {
        "read": True,
        "write": True,
        "edit": True,
        "ls": True,
        "grep": True,
        "bash": False,  # bash has its own timeout, and kills what it started
    }
    assert grep.is_error
    assert grep.text.startswith("grep stopped: it did not finish within 0.01 s")
