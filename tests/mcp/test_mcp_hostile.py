"""Servers written by an attacker: catastrophic patterns, escape sequences, floods of
content and progress, endless stderr, unset variables in the config."""

from __future__ import annotations

import time

import pytest
from mcp_helpers import run_agent, server_settings, settings_with

from mainspring import Agent, PluginLoadError
from mainspring.events import ToolExecutionUpdate
from mainspring.mcp.tools import PROGRESS_INTERVAL_S
from mainspring.settings import McpServerSettings
from mainspring.testing import FauxProvider, faux


def hostile(**options: object) -> object:
    return settings_with(h=server_settings("--hostile", **options))


async def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    # 40 characters: a backtracking engine would take hours to say no
    word = "a" * 40 + "!"
    run = await run_agent(
        [
            faux.tool_call("redos", {"word": word}),
            faux.tool_call("redos", {"word": "aaa"}),
            faux.text("ok"),
        ],
        hostile(),
    )
    refused, accepted = run.recorder.messages("tool_result")
    assert refused.is_error and "must match pattern" in refused.text
    assert accepted.text == "aaa" and not accepted.is_error


async def test_control_characters_are_escaped_before_the_model_and_terminal() -> None:
    run = await run_agent([faux.tool_call("ansi", {}), faux.text("ok")], hostile())
    (result,) = run.recorder.messages("tool_result")
    assert "\x1b" not in result.text and "\x07" not in result.text
    assert result.text == "\\x1b]0;title\\x07bell and \\x1b[2Jclear"
    (spec,) = [t for t in run.provider.requests[0].tools if t.name == "ansi"]
    assert spec.description == "\\x1b[31mred\\x1b[0m and \\u202eevil"


async def test_escaping_can_be_turned_off() -> None:
    run = await run_agent(
        [faux.tool_call("ansi", {}), faux.text("ok")], hostile(escape_control=False)
    )
    (result,) = run.recorder.messages("tool_result")
    assert result.text.startswith("\x1b]0;title\x07")


async def test_content_is_capped_by_blocks_with_one_notice() -> None:
    run = await run_agent(
        [faux.tool_call("flood", {"blocks": 20000, "size": 3}), faux.text("ok")],
        hostile(max_content_blocks=10),
    )
    (result,) = run.recorder.messages("tool_result")
    assert len(result.content) == 11
    assert [block.text for block in result.content[:10]] == ["xxx"] * 10
    assert result.content[-1].text.startswith("[19990 content block(s) left out or cut short")


async def test_content_is_capped_by_bytes() -> None:
    run = await run_agent(
        [faux.tool_call("flood", {"blocks": 5, "size": 1000}), faux.text("ok")],
        hostile(max_content_bytes=2500),
    )
    (result,) = run.recorder.messages("tool_result")
    assert [len(block.text) for block in result.content[:3]] == [1000, 1000, 500]
    assert len(result.content) == 4 and "3 content block(s)" in result.content[-1].text


async def test_a_flood_of_progress_is_coalesced() -> None:
    began = time.monotonic()
    run = await run_agent(
        [faux.tool_call("progress_flood", {"count": 20000}), faux.text("ok")], hostile()
    )
    elapsed = time.monotonic() - began
    updates = run.recorder.of_type(ToolExecutionUpdate)
    assert 1 <= len(updates) <= elapsed / PROGRESS_INTERVAL_S + 2
    assert updates[-1].partial_result.text == "step 19999"


async def test_stderr_keeps_its_tail_whatever_the_server_writes() -> None:
    run = await run_agent(
        [faux.tool_call("shout", {"megabytes": 2}), faux.tool_call("crash", {}), faux.text("ok")],
        hostile(),
    )
    shouted, crashed = run.recorder.messages("tool_result")
    assert shouted.text == "shouted"
    assert crashed.is_error and "crash: exiting with status 3" in crashed.text
    assert "the last line" in crashed.text


def test_an_unset_variable_is_a_load_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAINSPRING_TEST_TOKEN", raising=False)
    settings = settings_with(
        web=McpServerSettings(
            url="http://127.0.0.1:9/mcp",
            headers={"Authorization": "Bearer ${MAINSPRING_TEST_TOKEN}"},
        )
    )
    with pytest.raises(PluginLoadError) as caught:
        Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    assert 'MCP server "web": header Authorization uses ${MAINSPRING_TEST_TOKEN}' in str(
        caught.value
    )
