"""Every example of the hook reference (``docs/hook_examples.py``) does what it says, run
through a real agent on the scripted provider."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path
from typing import Any

import pytest

from mainspring import (
    Agent,
    AssistantMessage,
    Model,
    Settings,
    TextContent,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    tool,
)
from mainspring.contract import hookspecs
from mainspring.testing import faux, scripted_run

ROOT = Path(__file__).resolve().parent.parent


def _load_examples() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        "hook_examples", ROOT / "docs" / "hook_examples.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


examples = _load_examples()


def plugin(*hooks: str) -> types.SimpleNamespace:
    """A plugin made of the named example hooks only."""
    return types.SimpleNamespace(PLUGIN_NAME="example", **{h: getattr(examples, h) for h in hooks})


ran: list[str] = []


@tool
def shell(command: str) -> str:
    """Run a command (pretend)."""
    ran.append(command)
    return f"ran {command}"


@tool
def read_notes() -> str:
    """Read the notes."""
    ran.append("read_notes")
    return "the notes"


@tool(effects=("read", "egress"))
def fetch(url: str) -> str:
    """Fetch a URL (pretend); reports progress."""
    ran.append(url)
    return "token sk-live-123 found"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()
    examples.events_seen.clear()


def test_every_hook_has_an_example() -> None:
    hooks = hookspecs.SYNC_HOOKS | hookspecs.ASYNC_HOOKS
    assert {name for name in hooks if not hasattr(examples, name)} == set()


def _history(pairs: int) -> list[Any]:
    messages: list[Any] = [UserMessage(content="start")]
    for n in range(pairs):
        call = ToolCall(id=f"c{n}", name="shell", arguments={"command": f"ls {n}"})
        messages.append(AssistantMessage(content=(call,), stop_reason="tool_use"))
        messages.append(
            ToolResultMessage(
                tool_call_id=f"c{n}", tool_name="shell", content=(TextContent(text=f"out {n}"),)
            )
        )
    return messages


async def test_transform_context_elides_old_tool_output() -> None:
    run = await scripted_run(
        [faux.text("ok")], plugins=[plugin("transform_context")], messages=_history(8)
    )
    sent = run.provider.requests[-1].messages
    results = [m for m in sent if m.role == "tool_result"]
    assert results[0].text == "[old tool output elided]"
    assert results[-1].text == "out 7"  # recent ones are kept
    assert run.agent.state.messages[2].text == "out 0"  # the transcript is untouched


async def test_convert_to_llm_shows_notes_as_user_text() -> None:
    note = types.SimpleNamespace(role="note", text="the user prefers metric units")
    run = await scripted_run(
        [faux.text("ok")],
        plugins=[plugin("convert_to_llm")],
        messages=[UserMessage(content="hi"), note],
    )
    sent = run.provider.requests[-1].messages
    assert sent[-2].text == "(note from the user's UI) the user prefers metric units"


async def test_count_tokens_counts_code_models_at_three_characters() -> None:
    code = Model(provider="faux", id="code-small", context_window=200, max_output_tokens=10)
    history = [UserMessage(content="x" * 600), AssistantMessage(content=(TextContent(text="y"),))]
    run = await scripted_run(
        [faux.text("ok")],
        "go on",
        plugins=[plugin("count_tokens")],
        model=code,
        messages=history,
        settings=Settings(compaction={"reserve_tokens": 20}),
    )
    start = run.recorder.of_type("compaction_start")[0]
    assert start.tokens_before == (600 + 1 + 5) // 3  # the built-in estimate: 151, no compaction


async def test_compact_keeps_the_first_prompt_and_the_tail() -> None:
    tiny = Model(provider="faux", id="tiny", context_window=300, max_output_tokens=10)
    history = _history(6)
    history[0] = UserMessage(content="the task " * 150)
    run = await scripted_run(
        [faux.text("ok")],
        "go on",
        plugins=[plugin("compact")],
        model=tiny,
        messages=history,
        settings=Settings(compaction={"reserve_tokens": 50}),
    )
    end = run.recorder.of_type("compaction_end")[0]
    assert end.plugin == "example" and end.error is None
    kept = run.agent.state.messages
    assert kept[0] == history[0] and kept[1].role == "assistant"  # no orphaned result


async def test_before_tool_call_blocks_rm_rf_and_asks_about_sudo() -> None:
    steps = [
        faux.tool_call("shell", {"command": "rm -rf /"}),
        faux.tool_call("shell", {"command": "sudo reboot"}),
        faux.tool_call("shell", {"command": "ls"}),
        faux.text("done"),
    ]
    run = await scripted_run(steps, plugins=[plugin("before_tool_call")], tools=[shell])
    decisions = [(d.decision, d.decided_by) for d in run.recorder.of_type("tool_decision")]
    assert decisions == [("block", "gate"), ("block", "no_approver"), ("allow", "gate")]
    assert ran == ["ls"]
    assert "rm -rf is not allowed" in run.recorder.of_type("tool_execution_end")[0].result.text


async def test_request_approval_allows_reads_and_refuses_the_rest() -> None:
    asks = types.SimpleNamespace(
        PLUGIN_NAME="asks",
        before_tool_call=examples.hookimpl(lambda call: examples.Ask("check")),
    )
    steps = [
        faux.tool_call("read_notes", {}),
        faux.tool_call("shell", {"command": "ls"}),
        faux.text("done"),
    ]
    run = await scripted_run(
        steps, plugins=[asks, plugin("request_approval")], tools=[shell, read_notes]
    )
    decisions = [(d.tool_name, d.decision) for d in run.recorder.of_type("tool_decision")]
    assert decisions == [("read_notes", "allow"), ("shell", "block")]
    assert ran == ["read_notes"]


async def test_after_tool_result_redacts_keys() -> None:
    steps = [faux.tool_call("fetch", {"url": "https://example.com"}), faux.text("done")]
    run = await scripted_run(steps, plugins=[plugin("after_tool_result")], tools=[fetch])
    assert run.recorder.of_type("tool_execution_end")[0].result.text == "token [redacted] found"


async def test_review_reply_withholds_keys_and_marks_guarantees() -> None:
    reviewer = plugin("review_reply")
    run = await scripted_run([faux.text("your key is sk-live-123")], plugins=[reviewer])
    (end,) = run.recorder.messages("assistant")
    assert "sk-live" not in end.text and "withheld by example" in end.text
    assert run.agent.state.messages[-1].text == end.text
    run = await scripted_run([faux.text("It is guaranteed.")], plugins=[reviewer])
    assert run.recorder.messages("assistant")[0].text.endswith("check before relying on it.)")


async def test_label_tool_result_marks_fetched_pages_untrusted() -> None:
    steps = [faux.tool_call("fetch", {"url": "https://example.com"}), faux.text("done")]
    run = await scripted_run(steps, plugins=[plugin("label_tool_result")], tools=[fetch])
    (message,) = run.recorder.messages("tool_result")
    assert message.labels is not None and message.labels.untrusted


async def test_filter_tool_update_redacts_progress() -> None:
    @tool
    async def download(url: str, ctx: ToolContext) -> str:
        """Download a URL (pretend), reporting progress."""
        ctx.update("using key sk-live-123")
        return "done"

    steps = [faux.tool_call("download", {"url": "u"}), faux.text("done")]
    run = await scripted_run(steps, plugins=[plugin("filter_tool_update")], tools=[download])
    updates = [u.partial_result for u in run.recorder.of_type("tool_execution_update")]
    assert updates == ["using key [redacted]"]


async def test_should_stop_after_turn_stops_after_eight_turns() -> None:
    steps = [faux.tool_call("shell", {"command": f"step {n}"}) for n in range(12)]
    run = await scripted_run(steps, plugins=[plugin("should_stop_after_turn")], tools=[shell])
    assert run.recorder.of_type("agent_end")[0].reason == "stopped_by_hook"
    assert len(run.recorder.of_type("turn_end")) == 8


async def test_prepare_next_turn_thinks_harder_after_a_failed_call() -> None:
    steps = [
        faux.tool_call("shell", {"command": "ls"}),
        faux.tool_call("missing", {}),
        faux.text("done"),
    ]
    run = await scripted_run(steps, plugins=[plugin("prepare_next_turn")], tools=[shell])
    levels = [request.thinking_level for request in run.provider.requests]
    assert levels == ["off", "off", "high"]
    assert run.agent.state.thinking_level == "off"  # the agent's own setting is unchanged


async def test_on_event_logs_the_milestones() -> None:
    steps = [faux.tool_call("shell", {"command": "ls"}), faux.text("done")]
    await scripted_run(steps, plugins=[plugin("on_event")], tools=[shell])
    kinds = [line.split()[-1] for line in examples.events_seen]
    assert kinds == ["agent_start", "tool_execution_end", "agent_end"]


async def test_register_tools_gives_word_count() -> None:
    steps = [faux.tool_call("word_count", {"text": "one two three"}), faux.text("three")]
    run = await scripted_run(steps, plugins=[plugin("register_tools")])
    assert run.recorder.of_type("tool_execution_end")[0].result.text == "3"


async def test_register_providers_resolves_echo_models() -> None:
    agent = Agent(model="echo:any-id", plugins=[plugin("register_providers")], autoload=False)
    outcome = await agent.prompt("hello")
    assert outcome.text == "you said: hello"
