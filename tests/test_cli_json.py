"""``mainspring run --json``: message updates carry the delta and its block index, not the
whole partial message (``--json-full`` keeps it)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

from cli_in_process import run_cli
from mainspring import Agent, tool
from mainspring.cli.render import JsonRenderer
from mainspring.testing import FauxProvider, faux


@tool
def look(path: str) -> str:
    """Look at a path."""
    return f"seen {path}"


async def lines(full: bool) -> list[dict[str, Any]]:
    out = io.StringIO()
    script = [
        faux.reply(
            faux.thinking("let me think about it"),
            faux.text("I will look at two files."),
            faux.tool_call("look", {"path": "a.txt"}),
            faux.tool_call("look", {"path": "b.txt"}),
        ),
        faux.text("Both are fine."),
    ]
    agent = Agent(model="faux:x", provider=FauxProvider(script), tools=[look], autoload=False)
    agent.subscribe(JsonRenderer(out, full=full))
    await agent.prompt("look")
    return [json.loads(line) for line in out.getvalue().splitlines()]


async def test_an_update_names_the_block_its_delta_extends() -> None:
    small, full = await lines(False), await lines(True)

    updates = [event for event in small if event["type"] == "message_update"]
    assert updates and all("message" not in event for event in updates)
    full_updates = [event for event in full if event["type"] == "message_update"]
    assert len(full_updates) == len(updates)
    for event, whole in zip(updates, full_updates, strict=True):
        assert event["delta"] == whole["delta"]
        if event["delta"]["type"] == "usage":  # changes no block
            assert "index" not in event
            continue
        block = whole["message"]["content"][event["index"]]
        expected = {"text_delta": "text", "thinking_delta": "thinking"}.get(
            event["delta"]["type"], "tool_call"
        )
        assert block["type"] == expected, (event, block)
        if expected == "tool_call":
            assert block["id"] == event["delta"]["id"]
    assert {event.get("index") for event in updates} == {0, 1, 2, 3, None}
    # the same events either way
    assert [(e["type"], e["seq"]) for e in small] == [(e["type"], e["seq"]) for e in full]


def test_run_json_is_small_and_json_full_is_not(tmp_path: Path) -> None:
    (tmp_path / "long_plugin.py").write_text(
        "from mainspring import hookimpl\n"
        "from mainspring.testing import FauxProvider, faux\n"
        "name = 'long'\n"
        "@hookimpl\n"
        "def register_providers():\n"
        "    return [FauxProvider([faux.text('word ' * 400)], name='long')]\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path), MAINSPRING_DISABLE_PLUGIN_AUTOLOAD="1")

    PLUGIN = ("--plugin", "long_plugin", "--model", "long:x", "--no-session")

    def size(flag: str) -> int:
        done = run_cli(["run", "go", flag, *PLUGIN], env)
        assert done.returncode == 0, done.stderr
        return len(done.stdout)

    small, full = size("--json"), size("--json-full")
    # 500 updates of 4 characters: about 100 bytes each, not the reply so far each time
    assert small < 100_000 < full
